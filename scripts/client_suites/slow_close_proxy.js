// A TCP proxy, LISTEN_PORT -> TARGET_PORT on 127.0.0.1, that hands every broker answer to the
// client RESPONSE_DELAY_MS late and the broker's FIN FIN_DELAY_MS late: a slow broker in front of
// any broker, for the KafkaJS race in docs/compatibility.md.
//   node slow_close_proxy.js LISTEN_PORT TARGET_PORT FIN_DELAY_MS RESPONSE_DELAY_MS
// Give the broker advertised.listeners=PLAINTEXT://127.0.0.1:LISTEN_PORT so every connection
// goes through it.
const net = require('net')
const [listen, target, finDelay, responseDelay] = process.argv.slice(2).map(Number)
net.createServer({ allowHalfOpen: true }, client => {
  const server = net.connect({ port: target, host: '127.0.0.1', allowHalfOpen: true })
  client.pipe(server)
  server.on('data', d => setTimeout(() => client.write(d), responseDelay))
  server.on('end', () => setTimeout(() => client.end(), finDelay))
  client.on('error', () => server.destroy()); server.on('error', () => client.destroy())
}).listen(listen, '127.0.0.1', () => console.log('proxy ready'))
