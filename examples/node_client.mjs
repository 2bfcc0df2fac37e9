#!/usr/bin/env node
// tern from Node with no dependencies.
//
//   node examples/node_client.mjs [--url http://127.0.0.1:8080] [--api-key KEY] [prompt]
//       streams a chat completion over HTTP (server-sent events, via fetch)
//   node --experimental-websocket examples/node_client.mjs --ws [prompt]   (Node 20)
//   node examples/node_client.mjs --ws [prompt]                            (Node 22+)
//       runs two generations at once over one WebSocket (web/PROTOCOL.md)
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  if (i < 0) return def;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const url = opt('--url', 'http://127.0.0.1:8080').replace(/\/$/, '');
const apiKey = opt('--api-key', process.env.TERN_API_KEY || '');
const useWs = args.includes('--ws');
const prompt = args.filter((a) => a !== '--ws').join(' ') || 'Write a limerick about a cat.';

async function sse() {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(apiKey && { Authorization: `Bearer ${apiKey}` }) },
    body: JSON.stringify({
      messages: [{ role: 'user', content: prompt }],
      max_tokens: 128,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const decoder = new TextDecoder();
  let buf = '';
  for await (const bytes of res.body) {
    buf += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      if (!event.startsWith('data: ')) continue;
      const data = event.slice(6);
      if (data === '[DONE]') { process.stdout.write('\n'); return; }
      const chunk = JSON.parse(data);
      const delta = chunk.choices[0]?.delta?.content;
      if (delta) process.stdout.write(delta);
      if (chunk.usage) {
        const t = chunk.timings || {};
        process.stdout.write(`\n[${chunk.usage.completion_tokens} tokens, ` +
          `${(t.predicted_per_second || 0).toFixed(1)} tok/s, TTFT ${Math.round(t.ttft_ms || 0)} ms]`);
      }
    }
  }
}

function ws() {
  if (typeof WebSocket === 'undefined') {
    throw new Error('this Node has no WebSocket: use Node 22+, or node --experimental-websocket');
  }
  const wsUrl = url.replace(/^http/, 'ws') + '/v1/ws' + (apiKey ? `?api_key=${encodeURIComponent(apiKey)}` : '');
  const sock = new WebSocket(wsUrl);
  const texts = { a: '', b: '' };
  let open = 2;
  return new Promise((resolve, reject) => {
    sock.onerror = () => reject(new Error(`cannot connect to ${wsUrl}`));
    sock.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg.type === 'hello') {
        console.log(`connected: ${msg.model}`);
        sock.send(JSON.stringify({ type: 'generate', id: 'a', max_tokens: 96,
          messages: [{ role: 'user', content: prompt }] }));
        sock.send(JSON.stringify({ type: 'generate', id: 'b', max_tokens: 96,
          messages: [{ role: 'user', content: 'Now the same in French: ' + prompt }] }));
      } else if (msg.type === 'delta') {
        texts[msg.id] += msg.text;
      } else if (msg.type === 'done') {
        console.log(`\n--- ${msg.id} (${msg.finish_reason}, ${msg.usage.completion_tokens} tokens, ` +
          `${msg.timings.predicted_per_second.toFixed(1)} tok/s)\n${texts[msg.id]}`);
        if (--open === 0) { sock.close(); resolve(); }
      } else if (msg.type === 'error') {
        reject(new Error(msg.error.message));
      }
    };
  });
}

(useWs ? ws() : sse()).catch((e) => { console.error(e.message); process.exit(1); });
