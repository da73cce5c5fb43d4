// kafkajs against the listener (tests/engine/wire/test_streams.py): produce COUNT messages
// to TOPIC, then read them back as a member of GROUP; prints one JSON line.
// usage: node kafkajs_streams.js BOOTSTRAP TOPIC GROUP COUNT
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, groupId, countText] = process.argv.slice(2);
  const count = Number(countText);
  const kafka = new Kafka({ clientId: "plet-test", brokers: [bootstrap], logLevel: logLevel.ERROR });
  const producer = kafka.producer();
  await producer.connect();
  const sent = await producer.send({
    topic,
    messages: Array.from({ length: count }, (_, i) => ({ key: `k${i}`, value: `m${i}`, partition: 0 })),
  });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const got = [];
  let topics = new Set();
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out with ${got.length} messages`)), 30000);
    consumer.run({
      eachMessage: async ({ topic: seen, message }) => {
        topics.add(seen);
        got.push(message.value.toString());
        if (got.length >= count) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.commitOffsets([{ topic, partition: 0, offset: String(count) }]);
  await consumer.disconnect();
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
  await admin.disconnect();
  console.log(
    JSON.stringify({
      sentTopics: sent.map((r) => r.topicName),
      values: got,
      topics: [...topics],
      committed: offsets.map((t) => [t.topic, t.partitions.map((p) => [p.partition, p.offset])]),
    })
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
