package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func franzOpts(w *wireLog, bootstrap, clientID string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ClientID(clientID)}
	if w != nil {
		opts = append(opts, kgo.Dialer(w.dialContext))
	}
	return opts
}

var franzCodecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(),
	"zstd": kgo.ZstdCompression(),
}

func franzProduce(w *wireLog, bootstrap, topic string, s [4]string, n int) {
	clientID, codec, acks, mode := s[0], s[1], s[2], s[3]
	opts := append(franzOpts(w, bootstrap, clientID),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(franzCodecs[codec]), kgo.ProducerLinger(20*time.Millisecond))
	switch acks {
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if mode == "plain" {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
	}
	if mode == "txn" {
		opts = append(opts, kgo.TransactionalID(clientID+"-txn"))
	}
	cl, err := kgo.NewClient(opts...)
	fail(err)
	defer cl.Close()
	ctx := context.Background()
	if mode == "txn" {
		fail(cl.BeginTransaction())
	}
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)),
			Value: []byte(value(clientID, i)), Partition: int32(i % 2)})
	}
	results := cl.ProduceSync(ctx, recs...)
	fail(results.FirstErr())
	if mode == "txn" {
		fail(cl.EndTransaction(ctx, kgo.TryCommit))
	}
	for _, r := range results {
		var offset any = r.Record.Offset
		if acks == "0" {
			offset = nil
		}
		emit("event", "produced", "client_id", clientID, "codec", codec, "acks", acks,
			"mode", mode, "topic", r.Record.Topic, "partition", r.Record.Partition,
			"offset", offset, "key", string(r.Record.Key), "value", string(r.Record.Value))
	}
}

func franzPoll(cl *kgo.Client, clientID string, n int) {
	got := 0
	deadline := time.Now().Add(60 * time.Second)
	for got < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			emit("event", "consumed", "client_id", clientID, "topic", r.Topic,
				"partition", r.Partition, "offset", r.Offset, "key", string(r.Key),
				"value", string(r.Value))
		})
	}
}

func franzConsume(w *wireLog, bootstrap, topic, clientID, group, protocol string, n int) {
	opts := append(franzOpts(w, bootstrap, clientID), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit())
	if protocol == "consumer" {
		// KIP-848: franz-go runs the server-side assignor only when asked
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	fail(err)
	franzPoll(cl, clientID, n)
	ctx := context.Background()
	fail(cl.CommitUncommittedOffsets(ctx))
	for t, ps := range cl.CommittedOffsets() {
		for p, o := range ps {
			emit("event", "committed", "client_id", clientID, "topic", t, "partition", p,
				"offset", o.Offset)
		}
	}
	cl.LeaveGroup()
	cl.Close()
}

func franzShare(w *wireLog, bootstrap, topic, clientID, group string, n int) {
	adm, err := kgo.NewClient(franzOpts(w, bootstrap, clientID+"-admin")...)
	fail(err)
	// kadm has no group configs: the raw request, built with franz-go's kmsg
	v := "earliest"
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = "share.auto.offset.reset", &v, kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), adm)
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	admin("alter_group_config", err)
	adm.Close()
	opts := append(franzOpts(w, bootstrap, clientID), kgo.ShareGroup(group),
		kgo.ConsumeTopics(topic))
	cl, err := kgo.NewClient(opts...)
	fail(err)
	franzPoll(cl, clientID, n)
	fail(cl.FlushAcks(context.Background()))
	cl.Close()
}

func franzAdmin(w *wireLog, bootstrap, tag, clientID string) {
	cl, err := kgo.NewClient(franzOpts(w, bootstrap, clientID)...)
	fail(err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	topic, aclTopic := tag+"-admin", tag+"-acl"

	ct, err := adm.CreateTopics(ctx, 1, 1, nil, topic, aclTopic)
	admin("create_topics", first(err, ct.Error()))
	ct, err = adm.CreateTopics(ctx, 1, 1, nil, topic)
	admin("create_topics_again", first(err, ct.Error()))
	cp, err := adm.CreatePartitions(ctx, 2, topic)
	admin("create_partitions", first(err, cp.Error()))
	v := "3600000"
	ac, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, topic)
	admin("alter_topic_config", first(err, firstErr(ac, func(r kadm.AlterConfigsResponse) error { return r.Err })))
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	admin("describe_topic_config", first(err, firstErr(rc, func(r kadm.ResourceConfig) error { return r.Err })))
	acl := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics(aclTopic).
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)
	cr, err := adm.CreateACLs(ctx, acl)
	admin("create_acls", first(err, firstErr(cr, func(r kadm.CreateACLsResult) error { return r.Err })))
	filter := kadm.NewACLs().Topics(aclTopic).ResourcePatternType(kadm.ACLPatternLiteral).
		Operations(kadm.OpAny).Allow().AllowHosts().Deny().DenyHosts()
	dr, err := adm.DescribeACLs(ctx, filter)
	admin("describe_acls", first(err, firstErr(dr, func(r kadm.DescribeACLsResult) error { return r.Err })))
	del, err := adm.DeleteACLs(ctx, filter)
	admin("delete_acls", first(err, firstErr(del, func(r kadm.DeleteACLsResult) error { return r.Err })))
	sc, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "erin",
		Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "erin-scram512-Pa55word"}})
	admin("alter_scram_credentials", first(err, sc.Error()))
	lo, err := adm.ListEndOffsets(ctx, topic)
	admin("list_offsets", first(err, lo.Error()))
	_, err = adm.ListGroups(ctx)
	admin("list_groups", err)
	dg, err := adm.DescribeGroups(ctx, tag+"-no-such-group")
	admin("describe_groups", first(err, dg.Error()))
	dt, err := adm.DeleteTopics(ctx, topic, aclTopic)
	admin("delete_topics", first(err, dt.Error()))
}

func first(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// firstErr is the first per-item error of a kadm result slice (nil when none).
func firstErr[T any](items []T, errOf func(T) error) error {
	for _, it := range items {
		if err := errOf(it); err != nil {
			return err
		}
	}
	return nil
}
