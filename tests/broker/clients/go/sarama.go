package main

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig(w *wireLog, clientID string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = clientID
	cfg.Version = sarama.V4_0_0_0
	if w != nil {
		cfg.Net.Proxy.Enable = true
		cfg.Net.Proxy.Dialer = w
	}
	return cfg
}

var saramaCodecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4,
	"zstd": sarama.CompressionZSTD,
}

func saramaProduce(w *wireLog, bootstrap, topic string, s [4]string, n int) {
	clientID, codec, acks, mode := s[0], s[1], s[2], s[3]
	cfg := saramaConfig(w, clientID)
	cfg.Producer.Compression = saramaCodecs[codec]
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Frequency = 20 * time.Millisecond
	switch acks {
	case "0":
		cfg.Producer.RequiredAcks = sarama.NoResponse
	case "1":
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	default:
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	}
	if mode != "plain" {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	if mode == "txn" {
		cfg.Producer.Transaction.ID = clientID + "-txn"
	}
	p, err := sarama.NewSyncProducer([]string{bootstrap}, cfg)
	fail(err)
	if mode == "txn" {
		fail(p.BeginTxn())
	}
	var msgs []*sarama.ProducerMessage
	for i := 0; i < n; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 2),
			Key:   sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value: sarama.StringEncoder(value(clientID, i))})
	}
	fail(p.SendMessages(msgs))
	if mode == "txn" {
		fail(p.CommitTxn())
	}
	fail(p.Close())
	for _, m := range msgs {
		var offset any = m.Offset
		if acks == "0" {
			offset = nil
		}
		k, _ := m.Key.Encode()
		v, _ := m.Value.Encode()
		emit("event", "produced", "client_id", clientID, "codec", codec, "acks", acks,
			"mode", mode, "topic", m.Topic, "partition", m.Partition, "offset", offset,
			"key", string(k), "value", string(v))
	}
}

type saramaHandler struct {
	clientID string
	want     int
	got      int
	done     context.CancelFunc
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.got++
		emit("event", "consumed", "client_id", h.clientID, "topic", m.Topic,
			"partition", m.Partition, "offset", m.Offset, "key", string(m.Key),
			"value", string(m.Value))
		s.MarkMessage(m, "")
		if h.got >= h.want {
			s.Commit()
			h.done()
		}
	}
	return nil
}

func saramaConsume(w *wireLog, bootstrap, topic, clientID, group string, n int) {
	cfg := saramaConfig(w, clientID)
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	g, err := sarama.NewConsumerGroup([]string{bootstrap}, group, cfg)
	fail(err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := &saramaHandler{clientID: clientID, want: n, done: cancel}
	for ctx.Err() == nil {
		if err := g.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
			fail(err)
		}
	}
	fail(g.Close())
}

func saramaAdmin(w *wireLog, bootstrap, tag, clientID string) {
	cfg := saramaConfig(w, clientID)
	adm, err := sarama.NewClusterAdmin([]string{bootstrap}, cfg)
	fail(err)
	defer adm.Close()
	topic, aclTopic := tag+"-admin", tag+"-acl"
	detail := &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}
	_, _, err = adm.DescribeCluster()
	admin("describe_cluster", err)
	admin("create_topics", first(adm.CreateTopic(topic, detail, false),
		adm.CreateTopic(aclTopic, detail, false)))
	admin("create_topics_again", adm.CreateTopic(topic, detail, false))
	admin("create_partitions", adm.CreatePartitions(topic, 3, nil, false))
	v := "3600000"
	admin("alter_topic_config", adm.IncrementalAlterConfig(sarama.TopicResource, topic,
		map[string]sarama.IncrementalAlterConfigsEntry{"retention.ms": {
			Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}}, false))
	_, err = adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	admin("describe_topic_config", err)
	res := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: aclTopic,
		ResourcePatternType: sarama.AclPatternLiteral}
	admin("create_acls", adm.CreateACL(res, sarama.Acl{Principal: "User:alice", Host: "*",
		Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}))
	name := aclTopic
	filter := sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourceName: &name,
		ResourcePatternTypeFilter: sarama.AclPatternLiteral,
		Operation:                 sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	_, err = adm.ListAcls(filter)
	admin("describe_acls", err)
	_, err = adm.DeleteACL(filter, false)
	admin("delete_acls", err)
	_, err = adm.ListConsumerGroups()
	admin("list_groups", err)
	_, err = adm.DescribeLogDirs([]int32{1})
	admin("describe_log_dirs", err)
	admin("delete_topics", first(adm.DeleteTopic(topic), adm.DeleteTopic(aclTopic)))
}
