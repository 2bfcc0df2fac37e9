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
  vision: null,       // the server takes images (null: not known yet)
  audio: null,        // the server takes audio (null: not known yet)
};
const MAX_IMAGE_BYTES = 20 << 20;  // tern serve's default --max-media-mb

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
  ws.onopen = () => { setStatus('online', 'ok'); checkVision(); };
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

// Whether the model takes images (/v1/models says capabilities.vision with --mmproj).
async function checkVision() {
  const key = $('#api-key').value.trim();
  try {
    const r = await fetch('/v1/models', { headers: key ? { Authorization: `Bearer ${key}` } : {} });
    const m = (await r.json()).data[0];
    app.vision = !!(m && m.capabilities && m.capabilities.vision);
    app.audio = !!(m && m.capabilities && m.capabilities.audio);
  } catch {
    app.vision = null;
    app.audio = null;
  }
  for (const c of app.chats.values()) c.showVision();
}

// Any audio the browser decodes (an attached file, a MediaRecorder
// recording in whatever container the browser records) as 16 kHz mono
// 16-bit WAV in base64: a format tern always decodes.
async function toWav16k(blob) {
  const ctx = new AudioContext();
  let decoded;
  try {
    decoded = await ctx.decodeAudioData(await blob.arrayBuffer());
  } finally {
    ctx.close();
  }
  const n = Math.max(1, Math.ceil(decoded.duration * 16000));
  const off = new OfflineAudioContext(1, n, 16000);  // resampled and mixed down to mono
  const src = off.createBufferSource();
  src.buffer = decoded;
  src.connect(off.destination);
  src.start();
  const pcm = (await off.startRendering()).getChannelData(0);
  const v = new DataView(new ArrayBuffer(44 + pcm.length * 2));
  const tag = (at, t) => { for (let i = 0; i < 4; i++) v.setUint8(at + i, t.charCodeAt(i)); };
  tag(0, 'RIFF'); v.setUint32(4, 36 + pcm.length * 2, true); tag(8, 'WAVE');
  tag(12, 'fmt '); v.setUint32(16, 16, true); v.setUint16(20, 1, true); v.setUint16(22, 1, true);
  v.setUint32(24, 16000, true); v.setUint32(28, 32000, true); v.setUint16(32, 2, true);
  v.setUint16(34, 16, true); tag(36, 'data'); v.setUint32(40, pcm.length * 2, true);
  for (let i = 0; i < pcm.length; i++) {
    v.setInt16(44 + 2 * i, Math.round(Math.max(-1, Math.min(1, pcm[i])) * 32767), true);
  }
  const bytes = new Uint8Array(v.buffer);
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
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
  constructor(chat, id, bubble, images, clips = 0) {
    this.chat = chat;
    this.id = id;
    this.bubble = bubble;
    this.images = images;  // images in the request (this turn's and earlier turns')
    this.clips = clips;    // audio clips, the same way
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
      image: imageCache(this.images, t),
      audio: imageCache(this.clips, t, 'audio', 'clip(s)'),
    };
    if (msg.error) {
      stats.reason = 'error: ' + msg.error;
      this.bubble.classList.add('error');
    }
    $('.meta', this.bubble).textContent = formatStats(stats);
    for (const kind of ['image', 'audio']) {
      if (!stats[kind] || !stats[kind].reused) continue;
      const badge = document.createElement('span');
      badge.className = 'cache-badge';
      badge.dataset.testid = `${kind}-cache`;
      badge.textContent = `cached ${kind}`;
      badge.title = stats[kind].how;
      this.bubble.appendChild(badge);
      this.chat.scroll();
    }
    this.chat.done(this, stats);
  }
}

// What the server did for the request's images, from the done message's
// timings: image_n counts the images whose embedding rows it fetched (an image
// inside a reused KV prefix needs none), image_cache_hits those found in the
// embedding cache, image_encode_ms the time spent getting rows (the three are
// left out when no rows were fetched).
// The same for audio clips: kind 'audio' reads audio_n, audio_cache_hits and
// audio_encode_ms.
function imageCache(images, t, kind = 'image', noun = 'image(s)') {
  if (!images) return null;
  const fetched = t[`${kind}_n`] || 0;
  const viaKv = Math.max(0, images - fetched);
  const hits = t[`${kind}_cache_hits`] || 0;
  const how = [];
  if (viaKv) how.push(`${viaKv} ${noun} inside the reused KV prefix`);
  if (hits) how.push(`${hits} ${noun} from the embedding cache`);
  const encoded = fetched - hits;
  if (encoded > 0) how.push(`${encoded} encoded in ${Math.round(t[`${kind}_encode_ms`] || 0)} ms`);
  return { reused: viaKv + hits > 0, how: how.join(', ') };
}

function formatStats(s) {
  const parts = [];
  parts.push(s.ttft === null ? 'TTFT –' : `TTFT ${Math.round(s.ttft)} ms`);
  parts.push(s.rate ? `${s.rate.toFixed(1)} tok/s` : '– tok/s');
  parts.push(`${s.tokens} tokens`);
  // The prompt's KV reused from the prefix cache (earlier turns, shared system prompts).
  if (s.prompt) parts.push(`prompt ${s.prompt} (${s.cached} cached)`);
  if (s.image) parts.push(`images: ${s.image.how}`);
  if (s.audio) parts.push(`audio: ${s.audio.how}`);
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
    this.pending = [];    // attached media not yet sent: {name, url, audio (base64 WAV, clips only)}
    this.attachments = $('.attachments', this.el);
    this.fileInput = $('.file', this.el);
    this.attachBtn = $('.attach', this.el);
    this.attachBtn.addEventListener('click', () => this.fileInput.click());
    this.audioInput = $('.audio-file', this.el);
    this.audioBtn = $('.attach-audio', this.el);
    this.micBtn = $('.mic', this.el);
    this.recorder = null;
    this.audioBtn.addEventListener('click', () => this.audioInput.click());
    this.audioInput.addEventListener('change', () => {
      for (const f of this.audioInput.files) this.addAudio(f, f.name || 'audio');
      this.audioInput.value = '';
    });
    this.micBtn.addEventListener('click', () => this.toggleMic());
    this.fileInput.addEventListener('change', () => {
      this.attachFiles(this.fileInput.files);
      this.fileInput.value = '';
    });
    this.el.addEventListener('dragover', (e) => {
      if (!e.dataTransfer || ![...e.dataTransfer.types].includes('Files')) return;
      e.preventDefault();
      this.el.classList.add('dropping');
    });
    this.el.addEventListener('dragleave', (e) => {
      if (!this.el.contains(e.relatedTarget)) this.el.classList.remove('dropping');
    });
    this.el.addEventListener('drop', (e) => {
      e.preventDefault();
      this.el.classList.remove('dropping');
      if (e.dataTransfer) this.attachFiles(e.dataTransfer.files);
    });
    this.input.addEventListener('paste', (e) => {
      const files = [...(e.clipboardData ? e.clipboardData.items : [])]
        .filter((it) => it.kind === 'file' && it.type.startsWith('image/'))
        .map((it) => it.getAsFile());
      if (files.length) { e.preventDefault(); this.attachFiles(files); }
    });
    this.showVision();
    $('.composer', this.el).addEventListener('submit', (e) => { e.preventDefault(); this.submit(); });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); this.submit(); }
    });
    this.stopBtn.addEventListener('click', () => this.stop());
    $('.close', this.el).addEventListener('click', () => this.close());
    $('#chats').appendChild(this.el);
  }
  showVision() {
    const off = app.vision === false;
    this.attachBtn.disabled = off;
    this.attachBtn.title = off ? 'This server takes no images (start it with --mmproj)'
      : 'Attach an image (or drop one on the chat, or paste it)';
    const noAudio = app.audio === false;
    this.audioBtn.disabled = noAudio;
    this.micBtn.disabled = noAudio;
    this.audioBtn.title = noAudio
      ? 'This server takes no audio (start it with --mmproj naming an audio projector)'
      : 'Attach an audio file';
    this.micBtn.title = noAudio ? this.audioBtn.title : 'Record from the microphone (click again to stop)';
  }
  // A clip (a file or a recording) converted to WAV, waiting to be sent.
  async addAudio(blob, name) {
    try {
      const data = await toWav16k(blob);
      this.pending.push({ name, url: `data:audio/wav;base64,${data}`, audio: data });
      this.showPending();
    } catch (e) {
      this.showStats({ ttft: null, tokens: 0, reason: `${name}: cannot decode (${e.message || e})` });
    }
  }
  async toggleMic() {
    if (this.recorder) {
      this.recorder.stop();
      return;
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (e) {
      this.showStats({ ttft: null, tokens: 0, reason: `microphone: ${e.message || e}` });
      return;
    }
    const chunks = [];
    const rec = new MediaRecorder(stream);
    rec.ondataavailable = (e) => { if (e.data.size) chunks.push(e.data); };
    rec.onstop = () => {
      for (const t of stream.getTracks()) t.stop();
      this.recorder = null;
      this.micBtn.textContent = 'Mic';
      this.micBtn.classList.remove('recording');
      this.addAudio(new Blob(chunks, { type: rec.mimeType }), 'recording');
    };
    rec.start();
    this.recorder = rec;
    this.micBtn.textContent = 'Stop';
    this.micBtn.classList.add('recording');
  }
  // Reads image files as data: URLs (the original bytes: the server identifies
  // a picture by its decoded pixels, so the same file is the same picture).
  attachFiles(files) {
    for (const f of files) {
      if (!f || !f.type.startsWith('image/')) continue;
      if (f.size > MAX_IMAGE_BYTES) {
        this.showStats({ ttft: null, tokens: 0, reason: `${f.name}: larger than 20 MiB` });
        continue;
      }
      const reader = new FileReader();
      reader.onload = () => {
        this.pending.push({ name: f.name || 'pasted image', url: reader.result });
        this.showPending();
      };
      reader.readAsDataURL(f);
    }
  }
  showPending() {
    this.attachments.replaceChildren(...this.pending.map((p, i) => {
      const d = document.createElement('span');
      d.className = 'attachment';
      d.dataset.testid = 'attachment';
      let img;
      if (p.audio) {
        img = document.createElement('audio');
        img.controls = true;
        img.title = p.name;
      } else {
        img = document.createElement('img');
        img.alt = p.name;
      }
      img.src = p.url;
      const x = document.createElement('button');
      x.type = 'button';
      x.textContent = '×';
      x.title = 'Remove';
      x.addEventListener('click', () => { this.pending.splice(i, 1); this.showPending(); });
      d.append(img, x);
      return d;
    }));
  }
  submit() {
    const text = this.input.value.trim();
    if ((!text && !this.pending.length) || this.current) return;
    this.input.value = '';
    const images = this.pending.filter((p) => !p.audio).map((p) => p.url);
    const audio = this.pending.filter((p) => p.audio).map((p) => p.audio);
    this.pending = [];
    this.showPending();
    this.ask(text, images, audio);
  }
  imagesInHistory(type = 'image_url') {
    let n = 0;
    for (const m of this.history) {
      if (Array.isArray(m.content)) n += m.content.filter((p) => p.type === type).length;
    }
    return n;
  }
  ask(text, images = [], audio = []) {
    if (this.current) return false;
    // With media: OpenAI content parts, the images first, then the clips
    // (input_audio, WAV), then the text.
    const content = images.length || audio.length
      ? [...images.map((url) => ({ type: 'image_url', image_url: { url } })),
         ...audio.map((data) => ({ type: 'input_audio', input_audio: { data, format: 'wav' } })),
         ...(text ? [{ type: 'text', text }] : [])]
      : text;
    this.history.push({ role: 'user', content });
    this.addBubble('user', text, images, audio);
    const bubble = this.addBubble('assistant', '');
    bubble.classList.add('pending');
    const id = `c${this.n}-${app.nextGen++}`;
    const g = new Generation(this, id, bubble, this.imagesInHistory(),
                             this.imagesInHistory('input_audio'));
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
  addBubble(role, text, images = [], audio = []) {
    const b = document.createElement('div');
    b.className = `bubble ${role}`;
    b.dataset.role = role;
    for (const data of audio) {
      const a = document.createElement('audio');
      a.className = 'clip';
      a.dataset.testid = 'clip';
      a.controls = true;
      a.src = `data:audio/wav;base64,${data}`;
      b.appendChild(a);
    }
    for (const url of images) {
      const img = document.createElement('img');
      img.className = 'picture';
      img.dataset.testid = 'picture';
      img.src = url;
      img.alt = 'attached image';
      b.appendChild(img);
    }
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
