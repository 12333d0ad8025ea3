// BROKEN: a Node consumer (kafkajs) with its defaults: eachMessage sends each order to
// order-events with a plain producer, and kafkajs commits the batch's offsets after the
// batch (autoCommit). A kill after some sends and before that commit reads the batch again
// and sends those orders twice (order-events: duplicated).
//
//   npm install && onceflow prove command --input orders --output topic:order-events \
//       --quick -- node broken.js

const { Kafka, logLevel } = require("kafkajs");

const kafka = new Kafka({
  clientId: "order-events",
  brokers: process.env.ONCEFLOW_BOOTSTRAP.split(","),
  logLevel: logLevel.ERROR,
});
const consumer = kafka.consumer({ groupId: "order-events" });
const producer = kafka.producer();

async function main() {
  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topics: [process.env.ONCEFLOW_INPUT_TOPIC], fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      await producer.send({
        topic: "order-events",
        messages: [{ key: message.key, value: message.value }],
      });
    },
  });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
