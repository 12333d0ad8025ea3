// KafkaJS 2.2.4's errorRecovery.spec.js test "recovers from crashes due to retriable errors
// exhausting the number of retries", outside jest, against the broker at $BOOTSTRAP: a consumer
// whose first JoinGroup throws crashes and restarts; a producer sharing its cluster object sends
// one record; the consumer must see it once. Built from KafkaJS's internal modules, as the test
// is. Prints each eachMessage call and one line
//   result ok|written-twice|redelivered|error calls_at_first_check=N calls_after_3s=M ...
// (the test itself checks calls_at_first_check, polled every 50 ms). KAFKAJS_LOG=debug logs
// the client. Exit 0 ok, 1 delivered twice, 2 error.
const crypto = require('crypto')
const kafkajs = require('kafkajs')
const Cluster = require('kafkajs/src/cluster')
const defaultSocketFactory = require('kafkajs/src/network/socketFactory')()
// Records, for every socket the client closes, how long the broker takes to close its side
// (client FIN -> 'end'): KafkaJS reuses its Connection object, and a late 'end' of the old
// socket fails the requests then in flight on the new one.
const finDelays = []
const socketFactory = args => {
  const socket = defaultSocketFactory(args)
  const end = socket.end.bind(socket)
  let endedAt = null
  socket.end = (...a) => { endedAt = Date.now(); return end(...a) }
  socket.on('end', () => { if (endedAt !== null) finDelays.push(Date.now() - endedAt) })
  return socket
}
const createProducer = require('kafkajs/src/producer')
const createConsumer = require('kafkajs/src/consumer')
const { createLogger, LEVELS: logLevel } = require('kafkajs/src/loggers')
const LoggerConsole = require('kafkajs/src/loggers/console')
const { KafkaJSError, KafkaJSNumberOfRetriesExceeded, KafkaJSNonRetriableError } =
  require('kafkajs/src/errors')

const bootstrap = process.env.BOOTSTRAP || 'localhost:9092'
const level = process.env.KAFKAJS_LOG === 'debug' ? logLevel.DEBUG : logLevel.NOTHING
const newLogger = () => createLogger({ level, logCreator: LoggerConsole })
const random = () => crypto.randomBytes(10).toString('hex')
const sleep = ms => new Promise(r => setTimeout(r, ms))
const t0 = Date.now()
const log = (...a) => console.log(`${String(Date.now() - t0).padStart(6)}ms`, ...a)

async function waitFor(fn, maxWait = 10000) {
  for (let waited = 0; waited < maxWait; waited += 50) {
    await sleep(50)
    const r = fn()
    if (r) return r
  }
  throw new Error('Timeout')
}

async function main() {
  const topic = `test-topic-${random()}`
  const groupId = `consumer-group-id-${random()}`
  const admin = new kafkajs.Kafka({ clientId: 'repro-admin', brokers: [bootstrap], logLevel: logLevel.NOTHING }).admin()
  await admin.connect()
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1, replicationFactor: 1 }] })
  await admin.disconnect()

  const cluster = new Cluster({ socketFactory, clientId: `test-${random()}`, brokers: [bootstrap],
    connectionTimeout: 3000, requestTimeout: 30000, logger: newLogger() })
  const producer = createProducer({ cluster, logger: newLogger() })
  producer.on(producer.events.REQUEST, e => { if (e.payload.apiName === 'Produce') log('produce request sent to', e.payload.broker, 'correlation', e.payload.correlationId) })
  producer.on(producer.events.REQUEST_TIMEOUT, e => log('produce request timeout', JSON.stringify(e.payload)))
  await producer.connect()
  const consumer = createConsumer({ cluster, groupId, logger: newLogger(), heartbeatInterval: 100,
    maxWaitTimeInMs: 1, maxBytesPerPartition: 180, retry: { retries: 0 } })
  const crashes = []
  consumer.on(consumer.events.CRASH, e => { crashes.push(e); log('crash restart=', e.payload.restart) })
  consumer.on(consumer.events.GROUP_JOIN, e => log('group join generation', e.payload.generationId, 'member', e.payload.memberId))
  consumer.on(consumer.events.DISCONNECT, () => log('consumer disconnected the shared cluster'))
  consumer.on(consumer.events.COMMIT_OFFSETS, e => log('commit', JSON.stringify(e.payload.topics)))

  const cause = new KafkaJSError(new Error('bomb'), { retriable: true })
  const error = new KafkaJSNonRetriableError(
    new KafkaJSNumberOfRetriesExceeded(cause, { retryCount: 5, retryTime: 10000, cause }), { cause })

  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const coordinator = await cluster.findGroupCoordinator({ groupId })
  const original = coordinator.joinGroup
  coordinator.joinGroup = async () => { coordinator.joinGroup = original; throw error }

  const calls = []
  await consumer.run({ eachMessage: async ({ partition, message }) => {
    calls.push(message.offset); log('eachMessage partition', partition, 'offset', message.offset)
  } })
  const key = random()
  log('send start')
  await producer.send({ acks: 1, topic, messages: [{ key: `key-${key}`, value: `value-${key}` }] })
  log('produced')
  let status = 0
  try {
    await waitFor(() => crashes.length > 0)
    const first = await waitFor(() => calls.length)
    await sleep(3000)
    // Two calls at one offset: the consumer was given the same record twice (a broker
    // question: committed offset, fetch position). Two calls at two offsets: the record was
    // written twice (a producer retry), which the consumer rightly delivers twice.
    const kind = calls.length === 1 ? 'ok'
      : new Set(calls).size < calls.length ? 'redelivered' : 'written-twice'
    console.log(`result ${kind} calls_at_first_check=${first} calls_after_3s=${calls.length} ` +
      `offsets=${calls.join(',')} broker_fin_ms=${finDelays.join(',')}`)
    if (kind !== 'ok') status = 1
  } catch (e) {
    console.log(`result error ${e.message} calls=${calls.length}`)
    status = 2
  }
  await consumer.disconnect()
  await producer.disconnect()
  process.exit(status)
}
main().catch(e => { console.error(e); process.exit(2) })
