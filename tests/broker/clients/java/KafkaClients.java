// The Java client (kafka-clients of the broker's release) as a real peer of the real-broker
// tests: one small program, one scenario per command, the client-side truth as JSON lines on
// stdout. The client's own request log (NetworkClient at DEBUG: "Sending <API> request with
// header RequestHeader(...)") goes where the log4j2 configuration given by the test says.
//
// Compiled with javac against tests/broker/lib/*.jar by tests/support/java_clients.py.
//
//   produce   BOOTSTRAP TOPIC TAG N SPEC...   (SPEC codec:acks:plain|idempotent|txn)
//   paced     BOOTSTRAP TOPIC CLIENT_ID STOP_FILE INTERVAL_MS PARTITIONS
//   big       BOOTSTRAP TOPIC CLIENT_ID RECORD_BYTES BATCH_BYTES
//   idle      BOOTSTRAP TOPIC CLIENT_ID GROUP SECONDS
//   members   BOOTSTRAP TOPIC GROUP classic|consumer|share PREFIX STEP_MS
//   consume   BOOTSTRAP TOPIC CLIENT_ID GROUP classic|consumer N
//   share     BOOTSTRAP TOPIC CLIENT_ID GROUP N
//   admin     BOOTSTRAP TAG CLIENT_ID
//
// Output lines: {"event": "produced"|"consumed"|"admin"|"error", ...}.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.function.Supplier;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KafkaClients {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static void emit(Map<String, Object> line) throws Exception {
        System.out.println(JSON.writeValueAsString(line));
        System.out.flush();
    }

    private static Map<String, Object> line(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    /** The Kafka error name of an operation's failure (null when it succeeded). */
    private static String errorName(Throwable t) {
        while (t instanceof ExecutionException && t.getCause() != null) {
            t = t.getCause();
        }
        if (t instanceof ApiException) {
            Errors e = Errors.forException(t);
            if (e != Errors.UNKNOWN_SERVER_ERROR || t.getClass() == org.apache.kafka.common.errors.UnknownServerException.class) {
                return e.name();
            }
        }
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    private static Properties base(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        return p;
    }

    // ------------------------------------------------------------------ produce

    /** One producer per SPEC ``codec:acks:mode`` (mode: plain, idempotent, txn), client id
     *  ``TAG-codec-acks-mode``, each sending N records to partitions 0 and 1 in turn. */
    static void produce(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], tag = a[3];
        int n = Integer.parseInt(a[4]);
        for (int s = 5; s < a.length; s++) {
            String[] spec = a[s].split(":");
            produceWith(bootstrap, topic, tag + "-" + String.join("-", spec), spec[0], spec[1],
                        spec[2], n);
        }
    }

    static void produceWith(String bootstrap, String topic, String clientId, String codec,
                            String acks, String mode, int n) throws Exception {
        Properties p = base(bootstrap, clientId);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, mode.equals("plain") ? "false" : "true");
        if (mode.equals("txn")) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, clientId + "-txn");
        }
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            if (mode.equals("txn")) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, i % 2, "k" + i,
                                                            clientId + "-" + i)));
            }
            if (mode.equals("txn")) {
                producer.commitTransaction();
            }
            producer.flush();
            for (int i = 0; i < n; i++) {
                RecordMetadata md = sent.get(i).get();
                emit(line("event", "produced", "client_id", clientId, "codec", codec,
                          "acks", acks, "mode", mode, "topic", md.topic(),
                          "partition", md.partition(),
                          "offset", md.hasOffset() ? md.offset() : null,
                          "key", "k" + i, "value", clientId + "-" + i));
            }
        }
    }

    /** One record every INTERVAL_MS (acks=all, idempotent, retried until delivered) to
     *  partitions 0..PARTITIONS-1 in turn, until the file STOP_FILE exists. */
    static void paced(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], clientId = a[3];
        java.nio.file.Path stop = java.nio.file.Path.of(a[4]);
        int interval = Integer.parseInt(a[5]), partitions = Integer.parseInt(a[6]);
        Properties p = base(bootstrap, clientId);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        // longer than the cluster takes to fence a crashed node (and drop it from the ISR)
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "5000");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; !java.nio.file.Files.exists(stop); i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i,
                                                            clientId + "-" + i)));
                Thread.sleep(interval);
            }
            producer.flush();
        }
        for (int i = 0; i < sent.size(); i++) {
            try {
                RecordMetadata md = sent.get(i).get();
                emit(line("event", "produced", "client_id", clientId, "codec", "none",
                          "topic", md.topic(), "partition", md.partition(),
                          "offset", md.offset(), "key", "k" + i, "value", clientId + "-" + i));
            } catch (ExecutionException e) {
                emit(line("event", "produce_failed", "client_id", clientId, "key", "k" + i,
                          "error", errorName(e)));
            }
        }
    }

    /** Records of SIZE bytes until one batch of about TOTAL bytes is full (batch.size and
     *  max.request.size raised, no compression, a long linger): one Produce of 1 MB and more. */
    static void big(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], clientId = a[3];
        int size = Integer.parseInt(a[4]), total = Integer.parseInt(a[5]);
        Properties p = base(bootstrap, clientId);
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(total + 64 * 1024));
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, String.valueOf(4 * total));
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(8 * total));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2000");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        String pad = "x".repeat(size);
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; (long) i * size < total; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, "k" + i,
                                                            clientId + "-" + i + "-" + pad)));
            }
            producer.flush();
        }
        for (int i = 0; i < sent.size(); i++) {
            RecordMetadata md = sent.get(i).get();
            emit(line("event", "produced", "client_id", clientId, "codec", "none",
                      "topic", md.topic(), "partition", md.partition(), "offset", md.offset(),
                      "key", "k" + i, "value", clientId + "-" + i + "-" + pad));
        }
    }

    /** A classic consumer that joins GROUP at the end of TOPIC (nothing to read) and polls
     *  for SECONDS: every Fetch waits fetch.max.wait.ms (500 ms) on the broker. */
    static void idle(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], clientId = a[3], group = a[4];
        long until = System.currentTimeMillis() + 1000L * Integer.parseInt(a[5]);
        Properties p = base(bootstrap, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            int got = 0;
            while (System.currentTimeMillis() < until) {
                got += consumer.poll(Duration.ofMillis(200)).count();
            }
            emit(line("event", "idle", "client_id", clientId, "records", got));
        }
    }

    /** Group membership changes: member PREFIX-a joins GROUP (protocol classic, consumer or
     *  share) on TOPIC, PREFIX-b joins STEP_MS later, a leaves STEP_MS after that, b leaves
     *  STEP_MS after that. Every assignment a member's rebalance listener sees is printed
     *  (share groups have no listener: their assignments are the broker's alone). */
    static void members(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], group = a[3], protocol = a[4], prefix = a[5];
        long step = Long.parseLong(a[6]);
        java.util.concurrent.atomic.AtomicBoolean[] stop = {
            new java.util.concurrent.atomic.AtomicBoolean(),
            new java.util.concurrent.atomic.AtomicBoolean()};
        Thread[] threads = new Thread[2];
        for (int m = 0; m < 2; m++) {
            String clientId = prefix + "-" + (m == 0 ? "a" : "b");
            java.util.concurrent.atomic.AtomicBoolean done = stop[m];
            threads[m] = new Thread(() -> {
                try {
                    member(bootstrap, topic, group, protocol, clientId, done);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
        }
        threads[0].start();
        Thread.sleep(step);
        threads[1].start();
        Thread.sleep(step);
        stop[0].set(true);
        threads[0].join();
        Thread.sleep(step);
        stop[1].set(true);
        threads[1].join();
    }

    static void member(String bootstrap, String topic, String group, String protocol,
                       String clientId, java.util.concurrent.atomic.AtomicBoolean stop)
            throws Exception {
        Properties p = base(bootstrap, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (protocol.equals("share")) {
            try (KafkaShareConsumer<String, String> c =
                     new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
                c.subscribe(List.of(topic));
                while (!stop.get()) {
                    c.poll(Duration.ofMillis(100));
                }
            }
            emit(line("event", "left", "client_id", clientId));
            return;
        }
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        try (KafkaConsumer<String, String> c =
                 new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic), new org.apache.kafka.clients.consumer.ConsumerRebalanceListener() {
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    report("assigned", parts);
                }
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    report("revoked", parts);
                }
                void report(String what, Collection<TopicPartition> parts) {
                    try {
                        emit(line("event", what, "client_id", clientId,
                                  "partitions", sorted(parts),
                                  "assignment", sorted(c.assignment())));
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                }
            });
            while (!stop.get()) {
                c.poll(Duration.ofMillis(100));
            }
        }
        emit(line("event", "left", "client_id", clientId));
    }

    /** The partition numbers of {@code parts}, ascending. */
    private static List<Integer> sorted(Collection<TopicPartition> parts) {
        List<Integer> ids = new ArrayList<>();
        for (TopicPartition tp : parts) {
            ids.add(tp.partition());
        }
        Collections.sort(ids);
        return ids;
    }

    // ------------------------------------------------------------------ consume

    static void consume(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], clientId = a[3], group = a[4], protocol = a[5];
        int n = Integer.parseInt(a[6]);
        Properties p = base(bootstrap, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            int got = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (got < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    got++;
                    emit(line("event", "consumed", "client_id", clientId, "topic", r.topic(),
                              "partition", r.partition(), "offset", r.offset(),
                              "key", r.key(), "value", r.value()));
                }
            }
            consumer.commitSync();
            for (TopicPartition tp : consumer.assignment()) {
                emit(line("event", "committed", "client_id", clientId, "topic", tp.topic(),
                          "partition", tp.partition(), "offset", consumer.position(tp)));
            }
        }
    }

    static void share(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], clientId = a[3], group = a[4];
        int n = Integer.parseInt(a[5]);
        // a share group starts at the latest offset unless its share.auto.offset.reset says
        try (Admin admin = Admin.create(base(bootstrap, clientId + "-admin"))) {
            op("alter_group_config", () -> admin.incrementalAlterConfigs(Map.of(
                new ConfigResource(ConfigResource.Type.GROUP, group), List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"),
                    AlterConfigOp.OpType.SET)))).all());
        }
        Properties p = base(bootstrap, clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        try (KafkaShareConsumer<String, String> consumer =
                 new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            int got = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (got < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    got++;
                    emit(line("event", "consumed", "client_id", clientId, "topic", r.topic(),
                              "partition", r.partition(), "offset", r.offset(),
                              "key", r.key(), "value", r.value()));
                }
            }
            consumer.commitSync();
        }
    }

    // ------------------------------------------------------------------ admin

    /** Run one admin operation, emit its outcome (error name or null) and a detail. */
    private static <T> T op(String name, Supplier<KafkaFuture<T>> call) throws Exception {
        try {
            T value = call.get().get();
            emit(line("event", "admin", "op", name, "error", null));
            return value;
        } catch (ExecutionException e) {
            emit(line("event", "admin", "op", name, "error", errorName(e)));
            return null;
        }
    }

    static void admin(String[] a) throws Exception {
        String bootstrap = a[1], tag = a[2], clientId = a[3];
        String topic = tag + "-admin", aclTopic = tag + "-acl";
        try (Admin admin = Admin.create(base(bootstrap, clientId))) {
            op("describe_cluster", () -> admin.describeCluster().clusterId());
            op("create_topics", () -> admin.createTopics(List.of(
                new NewTopic(topic, 1, (short) 1), new NewTopic(aclTopic, 1, (short) 1))).all());
            op("create_topics_again", () -> admin.createTopics(List.of(
                new NewTopic(topic, 1, (short) 1))).all());
            op("create_partitions", () -> admin.createPartitions(
                Map.of(topic, NewPartitions.increaseTo(3))).all());
            op("describe_topics", () -> admin.describeTopics(List.of(topic)).allTopicNames());
            ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            op("alter_topic_config", () -> admin.incrementalAlterConfigs(Map.of(topicRes, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"),
                                  AlterConfigOp.OpType.SET)))).all());
            op("describe_topic_config", () -> admin.describeConfigs(List.of(topicRes)).all());
            // a sensitive (password) broker config: the broker refuses it without an SSL
            // listener of that name, but the value crossed the wire
            ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, "1");
            op("alter_sensitive_config", () -> admin.incrementalAlterConfigs(Map.of(brokerRes,
                List.of(new AlterConfigOp(new ConfigEntry(
                    "listener.name.plaintext.ssl.key.password", "java-ssl-key-Pa55word"),
                    AlterConfigOp.OpType.SET)))).all());
            op("describe_broker_config", () -> admin.describeConfigs(List.of(brokerRes)).all());
            AclBinding acl = new AclBinding(
                new ResourcePattern(ResourceType.TOPIC, aclTopic, PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ,
                                       AclPermissionType.ALLOW));
            op("create_acls", () -> admin.createAcls(List.of(acl)).all());
            AclBindingFilter aclFilter = new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, aclTopic, PatternType.LITERAL),
                AccessControlEntryFilter.ANY);
            op("describe_acls", () -> admin.describeAcls(aclFilter).values());
            op("delete_acls", () -> admin.deleteAcls(List.of(aclFilter)).all());
            op("alter_scram_credentials", () -> admin.alterUserScramCredentials(List.of(
                new UserScramCredentialUpsertion("dave",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                    "dave-scram256-Pa55word"))).all());
            op("describe_scram_credentials",
               () -> admin.describeUserScramCredentials(List.of("dave")).all());
            ClientQuotaEntity entity = new ClientQuotaEntity(
                Map.of(ClientQuotaEntity.CLIENT_ID, tag + "-quota"));
            op("alter_client_quotas", () -> admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(entity, List.of(
                    new ClientQuotaAlteration.Op("request_percentage", 200.0))))).all());
            op("describe_client_quotas",
               () -> admin.describeClientQuotas(ClientQuotaFilter.all()).entities());
            op("describe_log_dirs", () -> admin.describeLogDirs(List.of(1)).allDescriptions());
            op("describe_producers", () -> admin.describeProducers(
                List.of(new TopicPartition(topic, 0))).all());
            op("list_transactions", () -> admin.listTransactions().all());
            op("describe_transactions",
               () -> admin.describeTransactions(List.of(tag + "-no-such-txn")).all());
            op("list_offsets", () -> admin.listOffsets(Map.of(
                new TopicPartition(topic, 0), OffsetSpec.latest())).all());
            op("delete_records", () -> admin.deleteRecords(Map.of(
                new TopicPartition(topic, 0), RecordsToDelete.beforeOffset(0))).all());
            op("list_groups", () -> admin.listGroups().all());
            op("describe_features", () -> admin.describeFeatures().featureMetadata());
            op("delete_topics", () -> admin.deleteTopics(List.of(topic, aclTopic)).all());
        }
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce": produce(args); break;
            case "paced": paced(args); break;
            case "big": big(args); break;
            case "members": members(args); break;
            case "idle": idle(args); break;
            case "consume": consume(args); break;
            case "share": share(args); break;
            case "admin": admin(args); break;
            default: throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }
}
