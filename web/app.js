// tern demo page: several chats streaming over one WebSocket (/v1/ws).
// Protocol: PROTOCOL.md. No build step, no external resources.
'use strict';

const $ = (sel, root = document) => root.querySelector(sel);

const app = {
  ws: null,
  model: '',
  chats: new Map(),   // chat number -> Chat
  gens: new Map(),    // generation id -> Generation
  nextChat: 1,
  nextGen: 1,
  recent: [],         // [time ms, tokens] of recent deltas, for the aggregate rate
};

// ---- connection -----------------------------------------------------------

function wsUrl() {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const key = $('#api-key').value.trim();
  return `${proto}//${location.host}/v1/ws` + (key ? `?api_key=${encodeURIComponent(key)}` : '');
}

function setStatus(text, cls) {
  const el = $('#status');
  el.textContent = text;
  el.className = 'status ' + (cls || '');
}

function connect() {
  if (app.ws) app.ws.close();
  setStatus('connecting', '');
  const ws = new WebSocket(wsUrl());
  app.ws = ws;
  ws.onopen = () => setStatus('online', 'ok');
  ws.onclose = (ev) => {
    if (app.ws !== ws) return;
    setStatus(ev.code === 1001 ? 'server shut down' : 'offline', 'bad');
    for (const g of app.gens.values()) g.finish({ finish_reason: 'error', error: 'connection closed' });
    app.gens.clear();
  };
  ws.onerror = () => setStatus('connection failed (API key?)', 'bad');
  ws.onmessage = (ev) => {
    let msg;
    try { msg = JSON.parse(ev.data); } catch { return; }
    onMessage(msg);
  };
}

function send(obj) {
  if (!app.ws || app.ws.readyState !== WebSocket.OPEN) return false;
  app.ws.send(JSON.stringify(obj));
  return true;
}

function onMessage(msg) {
  if (msg.type === 'hello') {
    app.model = msg.model;
    $('#model').textContent = `${msg.model} · context ${msg.n_ctx}`;
    return;
  }
  const g = msg.id != null ? app.gens.get(msg.id) : null;
  switch (msg.type) {
    case 'start': if (g) g.started(msg); break;
    case 'delta': if (g) g.delta(msg); break;
    case 'done':
      if (g) { g.finish(msg); app.gens.delete(msg.id); }
      break;
    case 'error':
      if (g) {
        g.finish({ finish_reason: 'error', error: msg.error.message });
        app.gens.delete(msg.id);
      } else {
        console.warn('server error', msg.error);
      }
      break;
  }
}

// ---- one generation (one assistant reply) -----------------------------------

class Generation {
  constructor(chat, id, bubble) {
    this.chat = chat;
    this.id = id;
    this.bubble = bubble;
    this.text = '';
    this.t0 = performance.now();
    this.tFirst = null;
    this.tokens = 0;
  }
  started(msg) { this.promptTokens = msg.prompt_tokens; }
  delta(msg) {
    const now = performance.now();
    if (this.tFirst === null) this.tFirst = now;
    this.text += msg.text;
    this.tokens += msg.tokens;
    app.recent.push([now, msg.tokens]);
    $('.body', this.bubble).textContent = this.text;
    this.chat.showStats(this.liveStats());
    this.chat.scroll();
  }
  liveStats() {
    const ttft = this.tFirst === null ? null : this.tFirst - this.t0;
    const secs = this.tFirst === null ? 0 : (performance.now() - this.tFirst) / 1000;
    const rate = secs > 0 && this.tokens > 1 ? (this.tokens - 1) / secs : null;
    return { ttft, rate, tokens: this.tokens, reason: 'streaming' };
  }
  finish(msg) {
    this.bubble.classList.remove('pending');
    const t = msg.timings || {};
    const stats = {
      ttft: this.tFirst === null ? null : this.tFirst - this.t0,
      rate: t.predicted_per_second || this.liveStats().rate,
      tokens: msg.usage ? msg.usage.completion_tokens : this.tokens,
      prompt: msg.usage ? msg.usage.prompt_tokens : null,
      cached: t.cache_n || 0,
      reason: msg.finish_reason,
    };
    if (msg.error) {
      stats.reason = 'error: ' + msg.error;
      this.bubble.classList.add('error');
    }
    $('.meta', this.bubble).textContent = formatStats(stats);
    this.chat.done(this, stats);
  }
}

function formatStats(s) {
  const parts = [];
  parts.push(s.ttft === null ? 'TTFT –' : `TTFT ${Math.round(s.ttft)} ms`);
  parts.push(s.rate ? `${s.rate.toFixed(1)} tok/s` : '– tok/s');
  parts.push(`${s.tokens} tokens`);
  // The prompt's KV reused from the prefix cache (earlier turns, shared system prompts).
  if (s.prompt) parts.push(`prompt ${s.prompt} (${s.cached} cached)`);
  if (s.reason) parts.push(s.reason);
  return parts.join(' · ');
}

// ---- one chat panel -----------------------------------------------------------

class Chat {
  constructor(n) {
    this.n = n;
    this.history = [];    // OpenAI messages
    this.current = null;  // running Generation
    this.el = $('#chat-template').content.firstElementChild.cloneNode(true);
    this.el.dataset.chat = String(n);
    $('.chat-title', this.el).textContent = `Chat ${n}`;
    this.messages = $('.messages', this.el);
    this.input = $('textarea', this.el);
    this.sendBtn = $('.send', this.el);
    this.stopBtn = $('.stop', this.el);
    $('.composer', this.el).addEventListener('submit', (e) => { e.preventDefault(); this.submit(); });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); this.submit(); }
    });
    this.stopBtn.addEventListener('click', () => this.stop());
    $('.close', this.el).addEventListener('click', () => this.close());
    $('#chats').appendChild(this.el);
  }
  submit() {
    const text = this.input.value.trim();
    if (!text || this.current) return;
    this.input.value = '';
    this.ask(text);
  }
  ask(text) {
    if (this.current) return false;
    this.history.push({ role: 'user', content: text });
    this.addBubble('user', text);
    const bubble = this.addBubble('assistant', '');
    bubble.classList.add('pending');
    const id = `c${this.n}-${app.nextGen++}`;
    const g = new Generation(this, id, bubble);
    const ok = send({
      type: 'generate',
      id,
      messages: this.history,
      max_tokens: Number($('#max-tokens').value) || 256,
      temperature: Number($('#temperature').value),
      ignore_eos: $('#ignore-eos').checked,
    });
    if (!ok) {
      g.finish({ finish_reason: 'error', error: 'not connected' });
      return false;
    }
    app.gens.set(id, g);
    this.current = g;
    this.sendBtn.disabled = true;
    this.stopBtn.disabled = false;
    return true;
  }
  stop() {
    if (this.current) send({ type: 'cancel', id: this.current.id });
  }
  done(g, stats) {
    if (g.text) this.history.push({ role: 'assistant', content: g.text });
    else this.history.pop();  // nothing came back: forget the question too
    this.current = null;
    this.sendBtn.disabled = false;
    this.stopBtn.disabled = true;
    this.showStats(stats);
  }
  showStats(s) { $('.stats', this.el).textContent = formatStats(s); }
  addBubble(role, text) {
    const b = document.createElement('div');
    b.className = `bubble ${role}`;
    b.dataset.role = role;
    const body = document.createElement('div');
    body.className = 'body';
    body.textContent = text;
    b.appendChild(body);
    if (role === 'assistant') {
      const meta = document.createElement('div');
      meta.className = 'meta';
      b.appendChild(meta);
    }
    this.messages.appendChild(b);
    this.scroll();
    return b;
  }
  scroll() { this.messages.scrollTop = this.messages.scrollHeight; }
  close() {
    this.stop();
    this.el.remove();
    app.chats.delete(this.n);
  }
}

function newChat() {
  const c = new Chat(app.nextChat++);
  app.chats.set(c.n, c);
  return c;
}

// ---- aggregate throughput over every chat ---------------------------------------

function updateAggregate() {
  const now = performance.now();
  app.recent = app.recent.filter(([t]) => now - t < 2000);
  const tokens = app.recent.reduce((n, [, k]) => n + k, 0);
  const running = app.gens.size;
  $('#aggregate').textContent = running || tokens
    ? `${running} running · ${(tokens / 2).toFixed(1)} tok/s total`
    : '';
}

// ---- wiring ------------------------------------------------------------------

$('#new-chat').addEventListener('click', () => newChat());
$('#reconnect').addEventListener('click', () => connect());
$('#api-key').addEventListener('change', () => connect());
$('#broadcast').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('#broadcast-text').value.trim();
  if (!text) return;
  $('#broadcast-text').value = '';
  for (const c of app.chats.values()) c.ask(text);
});
setInterval(updateAggregate, 500);

newChat();
newChat();
connect();
