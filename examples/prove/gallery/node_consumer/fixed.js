// FIXED: a Node consume-transform-produce (kafkajs) with Kafka transactions. autoCommit is
// off; each batch is sent to order-events in a transaction of a producer with a fixed
// transactionalId, and the batch's next offset is committed in the same transaction
// (sendOffsets): a kill aborts both and the batch is read again. The consumer reads
// read_committed (kafkajs's default).
//
//   npm install && onceflow prove command --input orders --output topic:order-events \
//       --quick -- node fixed.js

const { Kafka, logLevel } = require("kafkajs");

const kafka = new Kafka({
  clientId: "order-events",
  brokers: process.env.ONCEFLOW_BOOTSTRAP.split(","),
  logLevel: logLevel.ERROR,
});
const consumer = kafka.consumer({ groupId: "order-events" });
const producer = kafka.producer({
  transactionalId: "order-events",
  idempotent: true,
  maxInFlightRequests: 1,
});

async function main() {
  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topics: [process.env.ONCEFLOW_INPUT_TOPIC], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) {
        return;
      }
      const transaction = await producer.transaction();
      try {
        await transaction.send({
          topic: "order-events",
          messages: batch.messages.map((m) => ({ key: m.key, value: m.value })),
        });
        await transaction.sendOffsets({
          consumerGroupId: "order-events",
          topics: [
            {
              topic: batch.topic,
              partitions: [
                { partition: batch.partition, offset: (BigInt(batch.lastOffset()) + 1n).toString() },
              ],
            },
          ],
        });
        await transaction.commit();
      } catch (error) {
        await transaction.abort();
        throw error;
      }
    },
  });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
