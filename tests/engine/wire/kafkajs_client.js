// kafkajs against the listener, driven by tests/engine/wire/test_kafkajs.py: one scenario
// per run (argv: broker, scenario, topic), its findings printed as one JSON line.
"use strict";
const { Kafka, logLevel } = require("kafkajs");

const [broker, scenario, topic] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "plet-test", brokers: [broker], logLevel: logLevel.ERROR });

// Reads `count` messages as a member of `groupId`, then disconnects; how long the
// disconnect took is part of the answer.
async function readAsGroup(groupId, count, options = {}) {
  const consumer = kafka.consumer({ groupId, ...options });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const values = [];
  await new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString());
        if (values.length >= count) resolve();
      },
    });
  });
  return { consumer, values };
}

async function produce(count) {
  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < count; i++) messages.push({ value: `m${i}`, partition: 0 });
  await producer.send({ topic, messages });
  await producer.disconnect();
}

const scenarios = {
  // admin.resetOffsets({earliest: true}) commits -2; the next member reads from the start
  async resetEarliest() {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
    await produce(5);
    const first = await readAsGroup("js-reset", 5);
    await first.consumer.disconnect();
    await admin.resetOffsets({ groupId: "js-reset", topic, earliest: true });
    const fetched = await admin.fetchOffsets({ groupId: "js-reset", topics: [topic] });
    const second = await readAsGroup("js-reset", 5);
    await second.consumer.disconnect();
    await admin.disconnect();
    return {
      first: first.values,
      fetched: fetched[0].partitions.map((p) => [p.partition, p.offset]),
      second: second.values,
    };
  },
  // admin.deleteTopicRecords inside what was written: the low watermark is the offset asked,
  // and a new group reads from there
  async deleteRecords() {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
    await produce(5);
    // kafkajs finds the partition's leader in the admin's metadata, which has only the
    // topics it was asked about (the same against Kafka)
    await admin.fetchTopicMetadata({ topics: [topic] });
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "3" }] });
    const offsets = await admin.fetchTopicOffsets(topic);
    const after = await readAsGroup("js-deleted", 2);
    await after.consumer.disconnect();
    await admin.disconnect();
    return {
      offsets: offsets.map((p) => [p.partition, p.low, p.high]),
      values: after.values,
    };
  },
  // a member whose fetch is parked (nothing left to read) disconnects: kafkajs waits for
  // that fetch's answer (its maxWaitTimeInMs), then leaves the group
  async disconnectIdle() {
    await produce(1);
    const { consumer, values } = await readAsGroup("js-idle", 1, { maxWaitTimeInMs: 500 });
    await new Promise((resolve) => setTimeout(resolve, 300)); // its next fetch is parked
    const started = Date.now();
    await consumer.disconnect();
    return { values, disconnectMs: Date.now() - started };
  },
};

scenarios[scenario]()
  .then((result) => console.log(JSON.stringify(result)))
  .catch((error) => {
    console.error(error);
    process.exit(1);
  });
