// The compatibility scenario for kafkajs 2.2.4 (npm), run by
// compat/cmd/compat as
//
//   node scenario.js --broker HOST:PORT --topic T --group G [--txn]
//
// With --txn it also runs the step "transactions" (docs/transactions.md):
// a transactional producer commits, aborts and commits again, and
// read_committed and read_uncommitted consumers read what they must.
// It prints the same ##STEP / ##INFO lines as the Go scenarios
// (compat/internal/scen), and makes the same checks.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const N = 1000
const HALF = 500
const PARTITIONS = 3
const CONSUME_TIMEOUT = 30000
const CLIENT = 'kafkajs'

function arg (name) {
  const i = process.argv.indexOf('--' + name)
  if (i < 0 || i + 1 >= process.argv.length) throw new Error('missing --' + name)
  return process.argv[i + 1]
}

const emit = (kind, obj) => process.stdout.write(kind + ' ' + JSON.stringify(obj) + '\n')
const report = (step, status, detail) => emit('##STEP', { step, status, detail })

class Fail extends Error {}

async function run (step, fn) {
  try {
    const detail = await fn()
    report(step, 'pass', detail)
    return true
  } catch (e) {
    process.stderr.write((e && e.stack) + '\n')
    report(step, 'fail', e instanceof Fail ? e.message : `${e && e.name}: ${e && e.message}`)
    return false
  }
}

const pad = i => String(i).padStart(4, '0')
const key = i => 'key-' + pad(i)
const value = i => 'value-' + pad(i)
const headers = i => ({ idx: String(i), client: CLIENT })
const fmtOffsets = m => Object.keys(m).map(Number).sort((a, b) => a - b).map(p => `p${p}=${m[p]}`).join(' ')

function check (r) {
  const { p, o, k, v, h } = r
  if (!k || !k.startsWith('key-')) throw new Fail(`p${p}@${o}: key ${k} is not key-NNNN`)
  const i = Number(k.slice(4))
  if (v !== value(i)) throw new Fail(`p${p}@${o}: key ${k} has value ${v}, want ${value(i)}`)
  for (const [hk, hv] of Object.entries(headers(i))) {
    if (h[hk] !== hv) throw new Fail(`p${p}@${o}: key ${k} header ${hk} = ${h[hk]}, want ${hv}; headers ${JSON.stringify(h)}`)
  }
}

function checkFirst (recs) {
  const seen = new Set()
  const next = {}
  for (const r of recs) {
    check(r)
    if (seen.has(r.k)) throw new Fail(`key ${r.k} consumed twice (p${r.p}@${r.o})`)
    seen.add(r.k)
    const want = next[r.p] || 0
    if (r.o !== want) throw new Fail(`partition ${r.p}: consumed offset ${r.o}, want ${want} (the group started at the earliest offset)`)
    next[r.p] = r.o + 1
  }
}

function committedOf (recs) {
  const c = {}
  for (const r of recs) c[r.p] = Math.max(c[r.p] || 0, r.o + 1)
  return c
}

function covers (first, second, n) {
  const s = new Set(first.map(r => r.k))
  for (const r of second) s.add(r.k)
  return s.size >= n
}

function checkResume (first, committed, second, n) {
  const seen = new Set(first.map(r => r.k))
  const next = {}
  for (const r of second) {
    check(r)
    if (!(r.p in next)) {
      const want = committed[r.p] || 0
      if (r.o !== want) throw new Fail(`partition ${r.p}: resumed at offset ${r.o}, committed offset is ${want}`)
    } else if (r.o !== next[r.p]) {
      throw new Fail(`partition ${r.p}: offset ${r.o} after ${next[r.p] - 1} (gap or rewind)`)
    }
    next[r.p] = r.o + 1
    if (seen.has(r.k)) throw new Fail(`key ${r.k} (p${r.p}@${r.o}) read again after it was committed`)
    seen.add(r.k)
  }
  const missing = []
  for (let i = 0; i < n; i++) if (!seen.has(key(i))) missing.push(i)
  if (missing.length) throw new Fail(`${missing.length} of ${n} records never read by either consumer (first missing: ${key(missing[0])})`)
}

async function main () {
  const broker = arg('broker')
  const topic = arg('topic')
  const group = arg('group')
  emit('##INFO', { key: 'version', value: 'kafkajs ' + require('kafkajs/package.json').version + ', node ' + process.version })
  let lastErr = null
  const kafka = new Kafka({
    clientId: 'disgw-compat',
    brokers: [broker],
    logLevel: logLevel.ERROR,
    retry: { retries: 3 },
    logCreator: () => ({ level, log }) => {
      if (level <= logLevel.ERROR) lastErr = log.message + (log.error ? ': ' + log.error : '')
      process.stderr.write(JSON.stringify(log) + '\n')
    }
  })
  const withTimeout = (p, ms, what) => Promise.race([p, new Promise((resolve, reject) => setTimeout(() => reject(new Fail(`${what}: timed out after ${ms / 1000}s (last error: ${lastErr})`)), ms).unref())])

  await run('create', async () => {
    const admin = kafka.admin()
    await admin.connect()
    try {
      const created = await withTimeout(admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true }), 20000, 'admin.createTopics')
      if (!created) throw new Fail('admin.createTopics returned false (topic exists?)')
      const md = await admin.fetchTopicMetadata({ topics: [topic] })
      const n = md.topics[0].partitions.length
      if (n !== PARTITIONS) throw new Fail(`fetchTopicMetadata after create: ${n} partitions, want ${PARTITIONS}`)
    } finally {
      await admin.disconnect()
    }
    return `admin.createTopics made ${PARTITIONS} partitions`
  })

  await run('produce', async () => {
    const producer = kafka.producer()
    await producer.connect()
    try {
      const messages = []
      for (let i = 0; i < N; i++) messages.push({ key: key(i), value: value(i), headers: headers(i) })
      await withTimeout(producer.send({ topic, messages }), 60000, 'producer.send')
    } finally {
      await producer.disconnect()
    }
    return `${N} records acknowledged (default acks=-1)`
  })

  // consume joins the group, processes records one at a time until enough,
  // commits exactly those and disconnects.
  async function consume (enough) {
    const consumer = kafka.consumer({ groupId: group, retry: { retries: 3 } })
    const out = []
    let done
    const finished = new Promise(resolve => { done = resolve })
    let err = null
    try {
      await withTimeout(consumer.connect(), 20000, 'consumer.connect')
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      consumer.on(consumer.events.CRASH, e => { err = e.payload.error; done() })
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          if (enough(out)) return
          const h = {}
          for (const [hk, hv] of Object.entries(message.headers || {})) h[hk] = hv == null ? hv : hv.toString()
          out.push({ p: partition, o: Number(message.offset), k: message.key && message.key.toString(), v: message.value && message.value.toString(), h })
          if (enough(out)) done()
        }
      })
      const timer = setTimeout(done, CONSUME_TIMEOUT)
      await finished
      clearTimeout(timer)
      if (!enough(out)) {
        return [out, `timed out after ${CONSUME_TIMEOUT / 1000}s with ${out.length} records (${err ? 'crash: ' + err : 'last error: ' + lastErr})`]
      }
      const c = committedOf(out)
      await withTimeout(consumer.commitOffsets(Object.keys(c).map(p => ({ topic, partition: Number(p), offset: String(c[p]) }))), 20000, 'consumer.commitOffsets')
    } catch (e) {
      return [out, `${e.name}: ${e.message}`]
    } finally {
      await consumer.disconnect().catch(() => {})
    }
    return [out, null]
  }

  let first = null
  const consumed = await run('consume', async () => {
    const t0 = Date.now()
    const [recs, err] = await consume(r => r.length >= HALF)
    first = recs
    checkFirst(recs)
    if (err) throw new Fail(`group consumer processed ${recs.length} of ${HALF} records: ${err}`)
    return `processed ${recs.length} records in group ${group} and committed ${fmtOffsets(committedOf(recs))} (${((Date.now() - t0) / 1000).toFixed(1)}s)`
  })
  if (consumed) {
    const committed = committedOf(first)
    await run('resume', async () => {
      const [recs, err] = await consume(r => covers(first, r, N))
      try {
        checkResume(first, committed, recs, N)
      } catch (e) {
        throw new Fail(err ? `${e.message} (consumer: ${err})` : e.message)
      }
      if (err) throw new Fail(err)
      return `new consumer resumed at ${fmtOffsets(committed)} and read the other ${recs.length} records`
    })
  } else {
    report('resume', 'skip', 'needs a committed first consumer (consume failed)')
  }

  await run('describe', async () => {
    const admin = kafka.admin()
    await admin.connect()
    try {
      const d = await withTimeout(admin.describeGroups([group]), 20000, 'admin.describeGroups')
      const g = d.groups[0]
      if (g.errorCode) throw new Fail(`describeGroups: error code ${g.errorCode}`)
      // Every member has left: Kafka's group is Empty.
      if (g.state !== 'Empty' || g.members.length) throw new Fail(`group state ${JSON.stringify(g.state)} with ${g.members.length} members after every consumer closed, want "Empty" with 0`)
      const offs = await withTimeout(admin.fetchOffsets({ groupId: group, topics: [topic] }), 20000, 'admin.fetchOffsets')
      const committed = {}
      for (const po of offs[0].partitions) if (Number(po.offset) >= 0) committed[po.partition] = Number(po.offset)
      const ends = {}
      for (const po of await admin.fetchTopicOffsets(topic)) ends[po.partition] = Number(po.high)
      for (const p of Object.keys(ends)) {
        if (!(p in committed)) throw new Fail(`group state ${g.state}: partition ${p}: no committed offset, end offset ${ends[p]}`)
        if (committed[p] !== ends[p]) throw new Fail(`group state ${g.state}: partition ${p}: committed offset ${committed[p]}, end offset ${ends[p]}`)
      }
      return `group state ${JSON.stringify(g.state)}, ${g.members.length} members, committed ${fmtOffsets(committed)} = end offsets`
    } finally {
      await admin.disconnect()
    }
  })

  if (!process.argv.includes('--txn')) return
  // read reads topic from the start in a new group with read_committed (or
  // not) until it has want values or CONSUME_TIMEOUT passes, then 2 s more.
  async function read (txnTopic, committed, want) {
    const consumer = kafka.consumer({ groupId: `${group}-txn-${committed ? 'rc' : 'ru'}`, readUncommitted: !committed, maxWaitTimeInMs: 300 })
    const out = []
    let done
    const finished = new Promise(resolve => { done = resolve })
    try {
      await withTimeout(consumer.connect(), 20000, 'consumer.connect')
      await consumer.subscribe({ topics: [txnTopic], fromBeginning: true })
      await consumer.run({
        eachMessage: async ({ message }) => {
          out.push(message.value.toString())
          if (out.length >= want) setTimeout(done, 2000)
        }
      })
      const timer = setTimeout(done, CONSUME_TIMEOUT)
      await finished
      clearTimeout(timer)
    } finally {
      await consumer.disconnect().catch(() => {})
    }
    return out.sort()
  }
  await run('transactions', async () => {
    const txnTopic = topic + '.txn'
    const admin = kafka.admin()
    await admin.connect()
    try {
      await withTimeout(admin.createTopics({ topics: [{ topic: txnTopic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true }), 20000, 'admin.createTopics')
    } finally {
      await admin.disconnect()
    }
    const vals = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`)
    const c1 = vals('c1', 9)
    const ab = vals('ab', 7)
    const c2 = vals('c2', 5)
    const producer = kafka.producer({ transactionalId: `${CLIENT}-${topic}-txn`, maxInFlightRequests: 1, idempotent: true })
    await withTimeout(producer.connect(), 20000, 'producer.connect')
    try {
      for (const [values, commit] of [[c1, true], [ab, false], [c2, true]]) {
        const txn = await withTimeout(producer.transaction(), 20000, 'producer.transaction')
        await withTimeout(txn.send({ topic: txnTopic, messages: values.map((v, i) => ({ value: v, partition: i % PARTITIONS })) }), 20000, 'transaction.send')
        await withTimeout(commit ? txn.commit() : txn.abort(), 20000, commit ? 'transaction.commit' : 'transaction.abort')
      }
    } finally {
      await producer.disconnect().catch(() => {})
    }
    const committed = [...c1, ...c2].sort()
    const everything = [...c1, ...ab, ...c2].sort()
    let got = await read(txnTopic, true, committed.length)
    if (JSON.stringify(got) !== JSON.stringify(committed)) throw new Fail(`read_committed read ${got.length} values ${got}, want the ${committed.length} committed ones`)
    got = await read(txnTopic, false, everything.length)
    if (JSON.stringify(got) !== JSON.stringify(everything)) throw new Fail(`read_uncommitted read ${got.length} values ${got}, want all ${everything.length}`)
    return `3 transactions (commit ${c1.length}, abort ${ab.length}, commit ${c2.length} records): read_committed read the ${committed.length} committed, read_uncommitted all ${everything.length}`
  })
}

main().then(() => process.exit(0), e => {
  process.stderr.write((e && e.stack) + '\n')
  process.exit(1)
})
