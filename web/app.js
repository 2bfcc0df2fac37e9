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
  audio: null,        // the server takes sound (an audio projector loaded)
};
const MAX_IMAGE_BYTES = 20 << 20;  // tern serve's default --max-media-mb
const MAX_RECORD_SECONDS = 120;    // a microphone recording stops by itself here
// Containers the server decodes as they are (input_audio.format); other
// recordings and files are converted here to 16 kHz mono WAV first.
const AUDIO_FORMATS = {
  'audio/wav': 'wav', 'audio/x-wav': 'wav', 'audio/wave': 'wav', 'audio/vnd.wave': 'wav',
  'audio/mpeg': 'mp3', 'audio/mp3': 'mp3', 'audio/flac': 'flac', 'audio/x-flac': 'flac',
  'audio/ogg': 'ogg', 'audio/opus': 'ogg',
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
  ws.onopen = () => { setStatus('online', 'ok'); checkMedia(); };
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

// Whether the model takes images and sound (/v1/models says
// capabilities.vision / capabilities.audio with a --mmproj that has them).
async function checkMedia() {
  const key = $('#api-key').value.trim();
  try {
    const r = await fetch('/v1/models', { headers: key ? { Authorization: `Bearer ${key}` } : {} });
    const m = (await r.json()).data[0];
    const caps = (m && m.capabilities) || {};
    app.vision = !!caps.vision;
    app.audio = !!caps.audio;
  } catch {
    app.vision = null;
    app.audio = null;
  }
  for (const c of app.chats.values()) c.showMedia();
}

// ---- sound: files and the microphone, as input_audio parts -------------------

function base64Of(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

// 16 kHz mono 16-bit WAV of any audio the browser decodes (a MediaRecorder
// recording, an .m4a file): what the server's encoders take anyway.
async function toWav(blob) {
  const ctx = new AudioContext();
  let decoded;
  try {
    decoded = await ctx.decodeAudioData(await blob.arrayBuffer());
  } finally {
    ctx.close();
  }
  const rate = 16000;
  const frames = Math.max(1, Math.ceil(decoded.duration * rate));
  const off = new OfflineAudioContext(1, frames, rate);
  const src = off.createBufferSource();
  src.buffer = decoded;
  src.connect(off.destination);
  src.start();
  const pcm = (await off.startRendering()).getChannelData(0);
  const out = new DataView(new ArrayBuffer(44 + 2 * pcm.length));
  const text = (o, t) => { for (let i = 0; i < t.length; i++) out.setUint8(o + i, t.charCodeAt(i)); };
  text(0, 'RIFF'); out.setUint32(4, 36 + 2 * pcm.length, true); text(8, 'WAVE');
  text(12, 'fmt '); out.setUint32(16, 16, true); out.setUint16(20, 1, true); out.setUint16(22, 1, true);
  out.setUint32(24, rate, true); out.setUint32(28, 2 * rate, true); out.setUint16(32, 2, true);
  out.setUint16(34, 16, true); text(36, 'data'); out.setUint32(40, 2 * pcm.length, true);
  for (let i = 0; i < pcm.length; i++) {
    out.setInt16(44 + 2 * i, Math.round(Math.max(-1, Math.min(1, pcm[i])) * 32767), true);
  }
  return new Blob([out.buffer], { type: 'audio/wav' });
}

// A pending sound: {kind: 'audio', name, url (for the player), data, format}.
async function audioItem(blob, name) {
  let format = AUDIO_FORMATS[(blob.type || '').split(';')[0]];
  if (!format) {
    blob = await toWav(blob);
    format = 'wav';
  }
  const data = base64Of(new Uint8Array(await blob.arrayBuffer()));
  return { kind: 'audio', name, format, data, url: `data:${blob.type || 'audio/wav'};base64,${data}` };
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
  constructor(chat, id, bubble, images, sounds) {
    this.chat = chat;
    this.id = id;
    this.bubble = bubble;
    this.images = images;  // images in the request (this turn's and earlier turns')
    this.sounds = sounds;  // audio clips likewise
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
      image: mediaCache(this.images, t, 'image'),
      audio: mediaCache(this.sounds, t, 'audio'),
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

// What the server did for the request's images (kind 'image') or sounds
// ('audio'), from the done message's timings: <kind>_n counts those whose
// embedding rows it fetched (one inside a reused KV prefix needs none),
// <kind>_cache_hits those found in the embedding cache, <kind>_encode_ms the
// time spent getting rows (the three are left out when no rows were fetched).
function mediaCache(count, t, kind) {
  if (!count) return null;
  const fetched = t[`${kind}_n`] || 0;
  const viaKv = Math.max(0, count - fetched);
  const hits = t[`${kind}_cache_hits`] || 0;
  const how = [];
  if (viaKv) how.push(`${viaKv} ${kind}(s) inside the reused KV prefix`);
  if (hits) how.push(`${hits} ${kind}(s) from the embedding cache`);
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
    this.pending = [];    // attachments not yet sent: {kind: 'image', name, url} or audioItem()s
    this.attachments = $('.attachments', this.el);
    this.fileInput = $('.file', this.el);
    this.attachBtn = $('.attach', this.el);
    this.attachBtn.addEventListener('click', () => this.fileInput.click());
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
        .filter((it) => it.kind === 'file' && /^(image|audio)\//.test(it.type))
        .map((it) => it.getAsFile());
      if (files.length) { e.preventDefault(); this.attachFiles(files); }
    });
    this.micBtn = $('.mic', this.el);
    this.recorder = null;
    this.micBtn.addEventListener('click', () => this.toggleRecording());
    this.showMedia();
    $('.composer', this.el).addEventListener('submit', (e) => { e.preventDefault(); this.submit(); });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); this.submit(); }
    });
    this.stopBtn.addEventListener('click', () => this.stop());
    $('.close', this.el).addEventListener('click', () => this.close());
    $('#chats').appendChild(this.el);
  }
  showMedia() {
    const noImages = app.vision === false, noSound = app.audio === false;
    this.attachBtn.disabled = noImages && noSound;
    this.attachBtn.title = noImages && noSound
      ? 'This server takes no images or sound (start it with --mmproj)'
      : 'Attach an image or a sound file (or drop one on the chat, or paste it)';
    this.micBtn.disabled = noSound || !(navigator.mediaDevices && window.MediaRecorder);
    this.micBtn.title = noSound ? 'This server takes no sound (start it with an audio --mmproj)'
      : 'Record from the microphone (click again to stop)';
  }
  // Reads image files as data: URLs and sound files as input_audio parts (the
  // original bytes where the server decodes the container: it identifies a
  // picture by its decoded pixels and a clip by its decoded samples, so the
  // same file is the same picture or clip).
  attachFiles(files) {
    for (const f of files) {
      const sound = f && f.type.startsWith('audio/');
      if (!f || !(f.type.startsWith('image/') || sound)) continue;
      if (f.size > MAX_IMAGE_BYTES) {
        this.showStats({ ttft: null, tokens: 0, reason: `${f.name}: larger than 20 MiB` });
        continue;
      }
      if (sound) {
        audioItem(f, f.name || 'sound')
          .then((item) => { this.pending.push(item); this.showPending(); })
          .catch((e) => this.showStats({ ttft: null, tokens: 0, reason: `${f.name}: ${e.message}` }));
        continue;
      }
      const reader = new FileReader();
      reader.onload = () => {
        this.pending.push({ kind: 'image', name: f.name || 'pasted image', url: reader.result });
        this.showPending();
      };
      reader.readAsDataURL(f);
    }
  }
  // The microphone: a first click records (MediaRecorder), a second one
  // stops and attaches the recording as 16 kHz mono WAV.
  async toggleRecording() {
    if (this.recorder) {
      this.recorder.stop();
      return;
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (e) {
      this.showStats({ ttft: null, tokens: 0, reason: `microphone: ${e.message}` });
      return;
    }
    const rec = new MediaRecorder(stream);
    const chunks = [];
    rec.ondataavailable = (e) => { if (e.data.size) chunks.push(e.data); };
    const limit = setTimeout(() => rec.state === 'recording' && rec.stop(), MAX_RECORD_SECONDS * 1000);
    rec.onstop = async () => {
      clearTimeout(limit);
      for (const t of stream.getTracks()) t.stop();
      this.recorder = null;
      this.micBtn.textContent = 'Mic';
      this.micBtn.classList.remove('recording');
      try {
        const item = await audioItem(new Blob(chunks, { type: rec.mimeType }), 'recording');
        this.pending.push(item);
        this.showPending();
      } catch (e) {
        this.showStats({ ttft: null, tokens: 0, reason: `recording: ${e.message}` });
      }
    };
    this.recorder = rec;
    rec.start();
    this.micBtn.textContent = 'Stop rec';
    this.micBtn.classList.add('recording');
  }
  showPending() {
    this.attachments.replaceChildren(...this.pending.map((p, i) => {
      const d = document.createElement('span');
      d.className = 'attachment';
      d.dataset.testid = 'attachment';
      const img = document.createElement(p.kind === 'audio' ? 'audio' : 'img');
      img.src = p.url;
      if (p.kind === 'audio') img.controls = true;
      else img.alt = p.name;
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
    const media = this.pending;
    this.pending = [];
    this.showPending();
    this.ask(text, media);
  }
  partsInHistory(type) {
    let n = 0;
    for (const m of this.history) {
      if (Array.isArray(m.content)) n += m.content.filter((p) => p.type === type).length;
    }
    return n;
  }
  // media: pending attachments ({kind: 'image', url} or audioItem()s).
  ask(text, media = []) {
    if (this.current) return false;
    // With media: OpenAI content parts, the media first, then the text.
    const part = (m) => (m.kind === 'audio'
      ? { type: 'input_audio', input_audio: { data: m.data, format: m.format } }
      : { type: 'image_url', image_url: { url: m.url } });
    const content = media.length
      ? [...media.map(part), ...(text ? [{ type: 'text', text }] : [])]
      : text;
    this.history.push({ role: 'user', content });
    this.addBubble('user', text, media);
    const bubble = this.addBubble('assistant', '');
    bubble.classList.add('pending');
    const id = `c${this.n}-${app.nextGen++}`;
    const g = new Generation(this, id, bubble, this.partsInHistory('image_url'),
                             this.partsInHistory('input_audio'));
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
  addBubble(role, text, media = []) {
    const b = document.createElement('div');
    b.className = `bubble ${role}`;
    b.dataset.role = role;
    for (const m of media) {
      const sound = m.kind === 'audio';
      const el = document.createElement(sound ? 'audio' : 'img');
      el.className = sound ? 'sound' : 'picture';
      el.dataset.testid = sound ? 'sound' : 'picture';
      el.src = m.url;
      if (sound) el.controls = true;
      else el.alt = 'attached image';
      b.appendChild(el);
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
