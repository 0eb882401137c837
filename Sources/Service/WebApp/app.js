"use strict";
// Baton's web app: talks only to this batond (same origin), keeps no token anywhere: beyond loopback
// the login exchanges the token for an HttpOnly session cookie, and every change carries the
// session's CSRF secret (held in this variable only) as X-Baton-CSRF.
const $ = s => document.querySelector(s);
const esc = s => String(s ?? '').replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
let csrf = null, status = null, config = null, lastSeq = 0, es = null, run = null;
const events = [];

// ---- requests: every failure is shown in plain words -------------------------------------------
// How long a request waits for its answer, in seconds (a test may shorten them).
const LIMITS = {look: 4, library: 32, change: 35};
async function api(method, path, body, retried) {
  const opt = {method, headers: {Accept: 'application/json'}, credentials: 'same-origin'};
  if (method !== 'GET') {
    opt.headers['Content-Type'] = 'application/json';
    if (csrf) opt.headers['X-Baton-CSRF'] = csrf;
    opt.body = JSON.stringify(body || {});
  }
  // A look (GET) has an answer within 4 s or none: a speaker gone from the network (its Wi-Fi lost)
  // left the request hanging, and the page showing what played before as playing now. A look in the
  // library is batond asking the music server (it gives it 30 s): 32 s, and a timeout blames the
  // server (a slow one read "batond did not answer within 4 s"). A command may wait for the music
  // server too: 35 s, and no word that it failed.
  const library = method === 'GET' && path.startsWith('/api/v1/library/');
  const limit = method !== 'GET' ? LIMITS.change : library ? LIMITS.library : LIMITS.look;
  const ctl = new AbortController(), timer = setTimeout(() => ctl.abort(), limit * 1000);
  opt.signal = ctl.signal;
  let r, text = '', data = null;
  try {
    try { r = await fetch(path, opt); text = await r.text(); } catch (e) {
      throw new Error(!ctl.signal.aborted ? 'batond is not reachable (' + e.message + ')'
        : library ? `no answer within ${limit} s: the music server is slow (batond waits 30 s for it) or away`
        : method === 'GET' ? `batond did not answer within ${limit} s` : `no answer within ${limit} s: it may still happen`);
    }
  } finally { clearTimeout(timer); }
  let theirs = false;
  try { data = text ? JSON.parse(text) : null; } catch (e) {
    // Something between the page and batond (a proxy, a captive portal) answered with a page of its own.
    if (r.ok) throw new Error(`the answer to ${path} is not batond's (not JSON: ${r.headers.get('Content-Type') || 'no type'})`);
    theirs = true;
  }
  if (!r.ok) {
    // Another tab of this browser logged in again: its cookie (one per browser) replaced this tab's,
    // whose CSRF secret is the old session's. The session's secret is read again and the change sent
    // once more (refused by the csrf rule, it was not done).
    if (r.status === 403 && data && data.rule === 'csrf' && !retried) {
      let s = null;
      try { s = await api('GET', '/api/v1/session'); } catch (e) { /* the first refusal is said */ }
      if (s && !s.authenticated) showLogin();
      else if (s && s.csrf) { csrf = s.csrf; return api(method, path, body, true); }
    }
    if (r.status === 401 && path !== '/api/v1/session') showLogin();
    // A refused reload says why in `errors` (one line each).
    throw new Error((data && (data.error || (Array.isArray(data.errors) && data.errors.join('; ')))) ||
      ('HTTP ' + r.status + (theirs ? `, an answer that is not batond's (${r.headers.get('Content-Type') || 'no type'})` : '')));
  }
  return data;
}
// `ok` true: a success, gone after 4 s; 'warn': done, but with something to read (it stays, as an
// error does). `text` may be lines (an array): one line each.
let noticeSeq = 0;
function notify(text, ok) {
  const n = $('#notice'), lines = Array.isArray(text) ? text : [text], seq = ++noticeSeq;
  n.className = ok === 'warn' ? 'warn' : ok ? 'ok' : '';
  n.innerHTML = `<span>${lines.map(l => `<span class="line">${esc(l)}</span>`).join('')}</span><button type="button" id="notice-close" aria-label="Dismiss">×</button>`;
  n.hidden = false;
  $('#notice-close').addEventListener('click', () => { n.hidden = true; });
  // Hidden only if no other notice came meanwhile (one that starts alike, as a reload's, too).
  if (ok === true) setTimeout(() => { if (noticeSeq === seq) n.hidden = true; }, 4000);
}
function say(text) { $('#live').textContent = text; }
// The connection's word, written only when it changes: #conn is a live region (role=status), and a
// screen reader reads each write out again (a failing poll rewrote it every second).
function conn(text, state) {
  const c = $('#conn'), cls = 'conn' + (state ? ' ' + state : '');
  if (c.textContent !== text) c.textContent = text;
  if (c.className !== cls) c.className = cls;
}
async function act(what, method, path, body) {
  try {
    const answer = await api(method, path, body);
    refreshSoon();
    return answer;
  } catch (e) {
    notify(what + ' failed: ' + (loginShown ? 'the session ended: log in again' : e.message));
    // What the page showed for it (a slider moved, a button pressed) is redrawn from batond's answer.
    drawnCards = '';
    refreshSoon();
    return null;
  }
}

// ---- login / session ----------------------------------------------------------------------------
function showLogin() {
  conn('login needed', '');
  loginShown = true;
  $('#login').hidden = false; $('#tabs').hidden = true; $('#main').hidden = true; $('#logout').hidden = true;
  if (es) { es.close(); es = null; }
  $('#token').focus();
}
// While the login form is shown the session is asked every few seconds: another tab of this browser
// may log in (the cookie is the browser's), and this one then goes on without a login of its own.
let loginShown = false, starting = false;
setInterval(async () => {
  if (!loginShown || starting || $('#login').hidden) return;
  let s;
  try { s = await api('GET', '/api/v1/session'); } catch (e) { return; }
  if (s.authenticated && loginShown && !starting) start();
}, 3000);
async function start() {
  if (starting) return;
  starting = true;
  try { await begin(); } finally { starting = false; }
}
async function begin() {
  let s;
  // The failure as api() words it (a proxy's 502, a timeout), not always "not reachable".
  try { s = await api('GET', '/api/v1/session'); } catch (e) { conn(e.message, 'down'); setTimeout(start, 2000); return; }
  if (!s.authenticated) { showLogin(); return; }
  csrf = s.csrf || null;
  loginShown = false;
  $('#login').hidden = true; $('#tabs').hidden = false; $('#main').hidden = false;
  $('#logout').hidden = s.login !== 'required' || !csrf;
  try { config = await api('GET', '/api/v1/config'); } catch (e) { notify('Reading the configuration failed: ' + e.message); }
  await refresh();
  loadSounds();
  connect(0);
}
$('#login').addEventListener('submit', async ev => {
  ev.preventDefault();
  const token = $('#token').value;
  $('#login-error').textContent = '';
  try {
    const s = await api('POST', '/api/v1/session', {token});
    $('#token').value = '';
    csrf = s.csrf;
    start();
  } catch (e) {
    $('#login-error').textContent = 'Login refused: ' + e.message;
    $('#token').select();
  }
});
$('#logout').addEventListener('click', async () => {
  if (await act('Log out', 'DELETE', '/api/v1/session')) { csrf = null; showLogin(); }
});

// ---- tabs ---------------------------------------------------------------------------------------
const tabs = [...document.querySelectorAll('[role=tab]')];
function selectTab(tab, focus) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute('aria-selected', on); t.tabIndex = on ? 0 : -1;
    document.getElementById(t.getAttribute('aria-controls')).hidden = !on;
  }
  if (focus) tab.focus();
  const id = tab.getAttribute('aria-controls');
  if (id === 'queue') loadQueue();
  if (id === 'timeline') drawTimeline();
  if (id === 'library' && !$('#lib-results').innerHTML) showArtists();
}
tabs.forEach((t, i) => {
  t.addEventListener('click', () => selectTab(t));
  t.addEventListener('keydown', e => {
    const k = {ArrowRight: 1, ArrowLeft: -1}[e.key];
    if (k) { e.preventDefault(); selectTab(tabs[(i + k + tabs.length) % tabs.length], true); }
    if (e.key === 'Home') { e.preventDefault(); selectTab(tabs[0], true); }
    if (e.key === 'End') { e.preventDefault(); selectTab(tabs[tabs.length - 1], true); }
  });
});

// ---- status -------------------------------------------------------------------------------------
// A refresh asked for while one runs runs once more after it: no answer is missed, none doubled.
let refreshing = false, again = false;
// The last status asked for had no answer: what it said is shown dimmed, as unknown, and the
// timeline's bars end at its time (they are not drawn on to "now" as if still heard).
let statusFailed = false;
function refreshSoon() { refresh(); }
async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    const s = await api('GET', '/api/v1/status');
    if (!s || !Array.isArray(s.zones) || !Array.isArray(s.sources)) throw new Error("the answer to /api/v1/status is not batond's status");
    const wasFailed = statusFailed;
    status = s; uptimeAt = Date.now(); statusFailed = false;
    if (run !== null && status.run !== run) startedAgain();
    // batond answers again after it did not: the event stream is opened again (from the last event
    // seen). Through a gap in the network it can be half open — its end at batond gone, the reset
    // lost on the way — and an EventSource says open (readyState 1) while no event will ever come:
    // the page said "live" and showed nothing that happened.
    else if (wasFailed && es) { connect(lastSeq); conn('reconnecting…', 'down'); }
    noteHeard(s);
    run = status.run; render();
    if (es && es.readyState === 1) conn('live', 'live');
  } catch (e) {
    // A session that ended shows the login form, which says so: not the API's words for developers
    // ("a bearer token is required (Authorization: Bearer …)") over it.
    if (!loginShown) conn(e.message, 'down');
    // What the cards showed is no longer known: said (with what it last said), not left reading "playing".
    // The next answer redraws them even if it is what they showed before (nothing moved meanwhile).
    drawnCards = ''; drawnOthers = ''; statusFailed = true;
    for (const s of document.querySelectorAll('#zone-cards .state')) {
      if (s.dataset.state === 'unknown') continue;
      s.dataset.was = s.dataset.state;
      s.textContent = `unknown: ${e.message} (it last said: ${s.textContent})`;
      s.dataset.state = 'unknown';
    }
    // So are the other sources' states, the zones' and the table's: dimmed, with what they last said.
    for (const b of document.querySelectorAll('#other-sources li[data-source] b, #zone-table td.zstate')) {
      if (b.dataset.state === 'unknown') continue;
      b.textContent = `unknown (it last said: ${b.textContent})`;
      b.dataset.state = 'unknown';
      b.closest('li, tr').classList.add('stale');
    }
    for (const b of document.querySelectorAll('#zone-cards .badge')) { b.textContent = 'unknown'; b.className = 'badge unknown'; }
  }
  finally { refreshing = false; if (again) { again = false; refresh(); } }
}
const fmt = t => { if (t == null || !isFinite(t)) return '–:––'; t = Math.max(0, Math.floor(t)); return Math.floor(t / 60) + ':' + String(t % 60).padStart(2, '0'); };
const sourceById = id => status && status.sources.find(s => s.id === id);
function who(id) { const s = sourceById(id); return s ? `${s.sound} (${id})` : id; }
// The source's true state in words, as heard in zone z.
function stateWords(src, z) {
  if (!src) return ['silent', 'silent'];
  const extra = src.activity || src.sourceState || src.phase;
  // Paused, also while something covers it (the zone lists it silenced): it will not resume by itself.
  if (src.state === 'paused') return ['paused', 'paused'];
  if (z) {
    const m = z.silenced.find(x => x.source === src.id);
    if (m) {
      // A zone's silenced list holds muted sources too: silenced here only, a source plays on in its
      // other zones (its position moves, and it comes back here wherever it is by then). Interrupted
      // is silenced in every zone it has (the arbiter's word), and it waits for the cover to end.
      const others = status ? status.zones.filter(o => o.name !== z.name && src.zones.includes(o.name) && !o.silenced.some(x => x.source === src.id)) : [];
      const on = others.filter(o => o.state !== 'unavailable').map(o => o.name);
      if (others.length) return [`muted here by ${who(m.by)}` + (on.length ? `: it plays on in ${on.join(', ')}` : ''), 'muted'];
      return ['interrupted by ' + who(m.by), 'interrupted'];
    }
    // The zone's own alarm (when the status has it): a source is meant to be heard, the output is not.
    if (z.state === 'silent' && ['playing', 'ducked'].includes(src.state)) return ['silent: nothing comes out of the zone', 'silent'];
    // Its frames are mixed, but this zone's output is lost (a card unplugged, snapserver away).
    if (z.state === 'unavailable' && ['playing', 'ducked', 'unavailable'].includes(src.state)) return ['not heard: the zone is unavailable', 'unavailable'];
  }
  if (src.state === 'unavailable') return ['not heard: its zones are unavailable', 'unavailable'];
  if (src.state === 'interrupted') return ['interrupted' + (src.interruptedBy ? ' by ' + who(src.interruptedBy) : ''), 'interrupted'];
  // Paused while it waits (`paused: true` on a queued source): granted, it stays paused until a play.
  if (src.state === 'queued') return src.paused ? ['paused, waiting for the zone (queued): it will not play by itself when it gets it', 'paused'] : ['waiting for the zone (queued)', 'queued'];
  if (src.buffering) return ['buffering: ' + src.buffering, 'buffering'];
  if (['starting', 'buffering', 'silent'].includes(extra)) return [extra, extra];
  if (['starting', 'buffering', 'silent'].includes(src.state)) return [src.state, src.state];
  if (z) {
    const d = z.ducked.find(x => x.source === src.id);
    if (d) return [`playing, ducked ${d.levelDb} dB by ${who(d.by)}`, 'ducked'];
  }
  return ['playing', 'playing'];
}
function groupsOf(zone) { return ((config && config.groups) ? Object.entries(config.groups) : []).filter(([, zs]) => (zs.zones || zs).includes(zone)).map(([g]) => g); }
// The zone's output level (when the status has it: {peakDb, rmsDb}, −200 for digital silence): the
// meter's place in the card, and its value and words (set in place at each refresh).
function levelWords(z) {
  const l = z.level;
  if (!l || typeof l !== 'object' || l.rmsDb == null) return null;
  const rms = Number(l.rmsDb), peak = Number(l.peakDb);
  return {value: Math.max(-60, rms), words: rms <= -120 ? 'silence' : `${rms.toFixed(0)} dBFS rms, peak ${peak.toFixed(0)}`};
}
// Icons as inline SVG (no font needs to have the media symbols).
const icon = d => `<svg viewBox="0 0 24 24" width="18" height="18" aria-hidden="true" focusable="false"><path fill="currentColor" d="${d}"/></svg>`;
const ICON = {previous: icon('M6 5h2v14H6zM20 5v14L9 12z'), next: icon('M16 5h2v14h-2zM4 5v14l11-7z'), pause: icon('M6 5h4v14H6zM14 5h4v14h-4z'), play: icon('M7 5v14l12-7z'), stop: icon('M6 6h12v12H6z')};
let dragging = null, prevStates = {}, drawnCards = '', drawnOthers = '';
const cardOf = zone => [...$('#zone-cards').querySelectorAll('article[data-zone]')].find(x => x.dataset.zone === zone);
function render() {
  const s = status;
  $('#device').textContent = config && config.device ? '· ' + config.device : '';
  const cards = $('#zone-cards');
  const music = s.sources.filter(x => x.class === 'music');
  const live = [];
  const html = s.zones.map(z => {
    // What this zone plays: the newest music source in it (its controls are the card's), or else the
    // newest source of any class in it (a doorbell on a zone without music is not "silent").
    // Ids end in one counter for every class (`announce-9` is newer than `music-8`).
    const newest = list => list.filter(x => x.zones.includes(z.name)).sort((a, b) => +b.id.split('-').pop() - +a.id.split('-').pop())[0];
    const here = newest(music), shown = here || newest(s.sources.filter(x => z.audible.includes(x.id))) || newest(s.sources);
    const [words, cls] = stateWords(shown, z);
    const key = z.name + '|' + (shown ? shown.id : '') ;
    if (prevStates[z.name] !== undefined && prevStates[z.name] !== key + words) say(`${z.name}: ${shown ? (shown.track ? shown.track.title : shown.sound) + ' ' : ''}${words}`);
    prevStates[z.name] = key + words;
    const t = here && here.track;
    // No music anywhere (`music/resume` without an id acts on the newest music source, of any zone:
    // a sound played as music, an external player), and the queue kept from before a restart or a
    // stop was on this zone: the card offers it, as batonctl resume does (the page could only start
    // the music over from the library).
    const saved = !music.length && s.savedQueue && s.savedQueue.track && (s.savedQueue.zones || []).includes(z.name) ? s.savedQueue : null;
    const cover = t && t.coverArt ? `<img class="cover" alt="Cover of ${esc(t.album || t.title)}" src="/api/v1/library/cover/${encodeURIComponent(t.coverArt)}?size=176">` : `<div class="cover" aria-hidden="true">♪</div>`;
    const dur = t && t.durationSeconds, pos = here ? here.positionSeconds : null;
    const ducks = z.ducked.map(d => `<div class="duck">ducked to ${d.levelDb} dB by ${esc(who(d.by))} (the volume stays ${Math.round(z.volume * 100)}%)</div>`).join('');
    const heard = z.audible.filter(id => !shown || id !== shown.id).map(id => `<div class="meta">also heard: ${esc(who(id))}</div>`).join('');
    // Paused, or paused while queued: the button is Play (a Pause did nothing, and it could not be resumed).
    const paused = here && (here.state === 'paused' || here.paused === true);
    // What moves while nothing else changes (the position, the level) is set in place below: the
    // cards are rebuilt only when their content changes, or a tap between two refreshes got lost.
    const level = levelWords(z);
    // batond refuses a seek to the duration or past it: the slider ends a second before.
    live.push({zone: z.name, pos, max: dur ? Math.max(0, dur - 1) : Math.max(1, Math.ceil(pos || 0)), level});
    return `<article class="card" data-zone="${esc(z.name)}" aria-labelledby="zone-h-${esc(z.name)}">
      <h3 id="zone-h-${esc(z.name)}"><span>${esc(z.name)}</span><span class="badge ${esc(z.state)}">${esc(z.state)}</span></h3>
      ${groupsOf(z.name).length ? `<div class="chips" aria-label="groups">${groupsOf(z.name).map(g => `<span>${esc(g)}</span>`).join('')}</div>` : ''}
      <div class="np">${cover}<div>
        <div class="title">${shown ? esc(t ? t.title : shown.sound) : 'Nothing playing'}</div>
        ${t ? `<div class="meta">${esc(t.artist || '')}${t.album ? ' — ' + esc(t.album) : ''}</div>` : ''}
        <div class="state ${esc(cls)}" data-state="${esc(cls)}">${esc(words)}</div>
        ${here && here.streamError ? `<div class="err">${esc(here.streamError)}</div>` : ''}
        ${z.error ? `<div class="err">${esc(z.error)}</div>` : ''}
      </div></div>
      ${here ? `<div class="pos"><span class="at"></span>
        <input type="range" class="seek" data-source="${esc(here.id)}" data-track="${t ? here.trackIndex : ''}" min="0" step="1" aria-label="Position in ${esc(t ? t.title : here.sound)}" ${t ? '' : 'disabled'}>
        <span>${fmt(dur)}</span></div>
      <div class="controls" data-source="${esc(here.id)}">
        <button type="button" data-act="previous" aria-label="Previous track" ${t ? '' : 'disabled'}>${ICON.previous}</button>
        <button type="button" data-act="${paused ? 'resume' : 'pause'}" class="primary" aria-label="${paused ? 'Play' : 'Pause'}">${paused ? ICON.play : ICON.pause}</button>
        <button type="button" data-act="next" aria-label="Next track" ${t ? '' : 'disabled'}>${ICON.next}</button>
        <button type="button" data-act="stop" aria-label="Stop">${ICON.stop}</button>
        ${t && here.queueLength ? `<span class="meta">track ${here.trackIndex + 1} of ${here.queueLength}</span>` : ''}
      </div>` : saved ? `<div class="controls saved">
        <button type="button" data-act="resume" class="primary" aria-label="Play ${esc(saved.track.title)} from ${fmt(saved.positionSeconds)}">${ICON.play}</button>
        <span class="meta">saved: ${esc(saved.track.title)} at ${fmt(saved.positionSeconds)}, track ${saved.trackIndex + 1} of ${saved.queueLength}</span>
      </div>` : ''}
      ${heard}
      <div class="vol"><label for="vol-${esc(z.name)}">Volume</label>
        <input type="range" id="vol-${esc(z.name)}" class="volume" data-zone="${esc(z.name)}" min="0" max="${Math.floor((z.maxVolume ?? 1) * 100 + 1e-6)}" step="1" value="${Math.round(z.volume * 100)}">
        <output for="vol-${esc(z.name)}">${Math.round(z.volume * 100)}%</output></div>
      ${ducks}
      ${level ? '<div class="level"><span class="meta">Level</span><meter min="-60" max="0" low="-20" high="-6" optimum="-30"></meter><span class="meta words"></span></div>' : ''}
    </article>`;
  }).join('');
  // Rebuilding keeps the keyboard focus where it was (same card, same control) and a focused
  // slider's value as the user set it; while a slider is dragged with the pointer nothing is rebuilt.
  if (!dragging && html !== drawnCards) {
    drawnCards = html;
    const active = document.activeElement, card = active && active.closest && active.closest('#zone-cards article[data-zone]');
    let keep = null;
    // A focused volume slider keeps the user's value only while batond has not answered it yet.
    if (card) { const all = [...card.querySelectorAll('button, input')]; keep = {zone: card.dataset.zone, index: all.indexOf(active), value: active.classList.contains('volume') && volPending.has(card.dataset.zone) ? active.value : null}; }
    cards.innerHTML = html;
    if (keep) {
      const c = cardOf(keep.zone);
      const el = c && c.querySelectorAll('button, input')[keep.index];
      if (el) { if (keep.value != null && el.type === 'range') { el.value = keep.value; if (el.nextElementSibling && el.classList.contains('volume')) el.nextElementSibling.textContent = keep.value + '%'; } el.focus(); }
    }
  }
  for (const l of live) {
    const c = cardOf(l.zone);
    if (!c) continue;
    const at = c.querySelector('.pos .at'), seek = c.querySelector('input.seek');
    if (at) at.textContent = fmt(l.pos);
    if (seek && seek !== dragging) { seek.max = l.max; seek.value = Math.floor(l.pos || 0); }
    const meter = c.querySelector('.level meter');
    if (meter && l.level) { meter.value = l.level.value; meter.setAttribute('aria-label', `Output level of ${l.zone}: ${l.level.words}`); c.querySelector('.level .words').textContent = l.level.words; }
  }
  cards.querySelectorAll('img.cover').forEach(img => img.addEventListener('error', () => { const d = document.createElement('div'); d.className = 'cover'; d.textContent = '♪'; d.setAttribute('aria-hidden', 'true'); img.replaceWith(d); }, {once: true}));
  const others = s.sources.filter(x => x.class !== 'music');
  const otherHtml = others.length ? others.map(x => { const [w] = stateWords(x); return `<li data-source="${esc(x.id)}">${esc(x.sound)} <span class="dim">${esc(x.id)} · ${esc(x.class)} · ${esc(x.zones.join(', '))}</span> — <b>${esc(w)}</b> <button type="button" data-stop="${esc(x.id)}" aria-label="Stop ${esc(x.sound)}">Stop</button></li>`; }).join('') : '<li class="dim">none</li>';
  // Rebuilt only when it changes, as the cards: a Stop tap between two refreshes is not lost.
  if (drawnOthers !== otherHtml) { drawnOthers = otherHtml; $('#other-sources').innerHTML = otherHtml; }
  renderZones();
  renderChoosers();
  if (!$('#queue').hidden) queueFollows(s);
}
$('#zone-cards').addEventListener('click', e => {
  const b = e.target.closest('button[data-act]'); if (!b) return;
  // A saved queue's Play has no source: `music/resume` without an id plays the saved queue.
  const id = b.closest('.controls').dataset.source;
  const names = {pause: 'Pause', resume: 'Play', next: 'Next', previous: 'Previous', stop: 'Stop'};
  act(names[b.dataset.act], 'POST', '/api/v1/music/' + b.dataset.act, {id});
});
$('#other-sources').addEventListener('click', e => { const b = e.target.closest('button[data-stop]'); if (b) act('Stop', 'POST', '/api/v1/music/stop', {id: b.dataset.stop}); });
const volTimers = {}, volPending = new Set(), volWanted = {}, volSending = {};
$('#zone-cards').addEventListener('input', e => {
  const el = e.target;
  if (el.classList.contains('volume')) {
    const zone = el.dataset.zone;
    el.nextElementSibling.textContent = el.value + '%';
    volPending.add(zone);
    volWanted[zone] = el.value;
    clearTimeout(volTimers[zone]);
    volTimers[zone] = setTimeout(() => sendVolume(zone), 150);
  }
});
// One request at a time per zone, the newest value after it: two sent 150 ms apart could reach
// batond in either order, and the zone settled on the one the user had moved away from.
async function sendVolume(zone) {
  if (volSending[zone]) { volSending[zone].again = true; return; }
  volSending[zone] = {again: false};
  try {
    for (;;) {
      const sent = volWanted[zone];
      await act('Volume of ' + zone, 'POST', `/api/v1/zones/${encodeURIComponent(zone)}/volume`, {volume: sent / 100});
      if (volSending[zone].again && volWanted[zone] !== sent) { volSending[zone].again = false; continue; }
      // Answered (applied or refused): the slider shows batond's volume from now on, unless moved again.
      if (volWanted[zone] === sent) volPending.delete(zone);
      break;
    }
  } finally { delete volSending[zone]; }
}
// A pointer drag on a slider holds the cards still until it is let go.
$('#zone-cards').addEventListener('pointerdown', e => { if (e.target.type === 'range') dragging = e.target; });
// A touch that turns into a scroll ends with pointercancel, not pointerup.
for (const ev of ['pointerup', 'pointercancel']) document.addEventListener(ev, () => { if (dragging) { dragging = null; refreshSoon(); } });
$('#zone-cards').addEventListener('change', e => {
  const el = e.target;
  // In the track the slider was drawn for (the cards are not rebuilt while it is dragged): the next
  // track may have begun meanwhile, and a seek without it moved in that one.
  if (el.classList.contains('seek')) act('Seek', 'POST', '/api/v1/music/seek', Object.assign({position: Number(el.value), id: el.dataset.source}, el.dataset.track ? {track: Number(el.dataset.track)} : {}));
});

// ---- zones & settings ---------------------------------------------------------------------------
function renderZones() {
  const s = status;
  $('#zone-table tbody').innerHTML = s.zones.map(z => `<tr><th scope="row">${esc(z.name)}</th><td>${esc(z.pcm)}</td><td>${z.rate} Hz · ${z.channels} ch · ${esc(z.format)} · clock ${esc(z.clock)}</td>
    <td class="zstate">${esc(z.state)}${z.error ? ' — ' + esc(z.error) : ''}</td><td>${Math.round(z.volume * 100)}% (${esc(z.volumeControl)})</td><td>${(z.framesPlayed / z.rate).toFixed(1)} s</td><td>${z.xruns}</td><td>${z.lateCycles}</td><td>${z.reopens}</td></tr>`).join('');
  const groups = config && config.groups ? Object.entries(config.groups) : [];
  $('#group-table tbody').innerHTML = groups.length ? groups.map(([g, zs]) => `<tr><th scope="row">${esc(g)}</th><td>${esc((zs.zones || zs).join(', '))}</td></tr>`).join('') : '<tr><td colspan="2" class="dim">no groups</td></tr>';
  const policy = config && config.policy;
  if (policy) {
    const classes = policy.classes || policy;
    const rows = Object.entries(classes).filter(([, v]) => v && typeof v === 'object');
    const cols = [...new Set(rows.flatMap(([, v]) => Object.keys(v)))];
    $('#policy-table thead').innerHTML = `<tr><th scope="col">class</th>${cols.map(c => `<th scope="col">${esc(c)}</th>`).join('')}</tr>`;
    $('#policy-table tbody').innerHTML = rows.map(([k, v]) => `<tr><th scope="row">${esc(k)}</th>${cols.map(c => `<td>${esc(typeof v[c] === 'object' ? JSON.stringify(v[c]) : v[c] ?? '')}</td>`).join('')}</tr>`).join('');
  }
  const bits = [];
  if (s.mqtt) bits.push(`MQTT ${s.mqtt.broker}: ${s.mqtt.connection}${s.mqtt.error ? ' (' + s.mqtt.error + ')' : ''}`);
  // What explains a dead doorbell or intercom: a port that could not be bound read "idle", as if the
  // intercom listened; a button on a missing chip was shown nowhere.
  if (s.intercom) bits.push(`intercom ${s.intercom.listen}: ${s.intercom.error ? 'not listening: ' + s.intercom.error : s.intercom.inCall ? 'in a call' : 'idle'}`);
  for (const g of s.gpio || []) if (g.state !== 'listening' || g.error) bits.push(`button ${g.chip} line ${g.line}: ${g.state}${g.error ? ' — ' + g.error : ''}`);
  if (s.savedQueue) bits.push(`saved queue: ${s.savedQueue.track.title} (${s.savedQueue.trackIndex + 1}/${s.savedQueue.queueLength})`);
  bits.push(`up ${(s.uptimeMs / 1000).toFixed(0)} s`);
  $('#extra').textContent = bits.join(' · ');
}
$('#reload').addEventListener('click', async () => {
  const r = await act('Reload', 'POST', '/api/v1/reload');
  if (r) { reloadNotice(r); reloaded(); }
});
// A reload's answer in words: what it changed in one line; what it did not bring back (`warnings`) and
// the sections that wait for a restart (`needsRestart`) one line each, in a notice that stays.
function reloadNotice(r) {
  const list = k => Array.isArray(r[k]) ? r[k] : [];
  const done = [['zonesAdded', 'zones added'], ['zonesRemoved', 'zones removed'], ['zonesChanged', 'zones reopened'], ['externalSourcesChanged', 'external sources changed']]
    .filter(([k]) => list(k).length).map(([k, w]) => `${w}: ${list(k).join(', ')}`);
  if (r.policyChanged) done.push('new policy');
  if (r.soundsChanged) done.push('sounds loaded again');
  // The sections applied that no field above names (groups, speech, the music server…): without
  // them a reload of only those read "nothing changed". `sectionsApplied`, not `sectionsChanged`: a
  // section whose only change waits for a restart (said below) was said applied too.
  const said = new Set([...(['zonesAdded', 'zonesRemoved', 'zonesChanged'].some(k => list(k).length) ? ['zones'] : []),
    ...(r.policyChanged ? ['policy'] : []), ...(r.soundsChanged ? ['sounds', 'resampler'] : []), ...(list('externalSourcesChanged').length ? ['external-sources'] : [])]);
  const other = list('sectionsApplied').filter(s => !said.has(s));
  if (other.length) done.push(`settings applied: ${other.join(', ')}`);
  // Changes that all wait for a restart are not "nothing changed": nothing of them applies yet.
  const summary = 'Reloaded: ' + (done.length ? done.join('; ') : list('needsRestart').length ? 'nothing applied now'
    : Array.isArray(r.sectionsChanged) ? 'nothing changed' : 'applied');
  const more = [...list('warnings').map(w => 'warning: ' + w),
    ...(list('needsRestart').length ? [`takes effect only after a restart of batond: ${list('needsRestart').join(', ')}`] : [])];
  if (more.length) notify([summary, ...more], 'warn'); else notify(summary, true);
}
// A reload applied (from this page, SIGHUP, batonctl, another phone): what the page read at its
// start (groups, the policy, the sounds) is read again, and drawn with the next status.
function reloaded() {
  api('GET', '/api/v1/config').then(c => { config = c; if (status) render(); }).catch(e => notify('Reading the configuration failed: ' + e.message));
  loadSounds();
}

// ---- zone choosers (play on…, announce on…) -----------------------------------------------------
const chosen = {'play-on': new Set(), 'announce-on': new Set()};
function renderChoosers() {
  const names = [...status.zones.map(z => z.name), ...(config && config.groups ? Object.keys(config.groups) : [])];
  for (const id of Object.keys(chosen)) {
    const box = document.getElementById(id);
    const key = names.join(',');
    if (box.dataset.names === key) continue;
    box.dataset.names = key;
    // A zone or group a reload removed is no longer chosen: every play would be refused for it,
    // with no box left to untick.
    for (const n of [...chosen[id]]) if (!names.includes(n)) chosen[id].delete(n);
    box.innerHTML = `<legend>${id === 'play-on' ? 'Play on' : 'Announce on'} <span class="dim">(none ticked: the default zones)</span></legend>` +
      names.map(n => `<label><input type="checkbox" value="${esc(n)}" ${chosen[id].has(n) ? 'checked' : ''}> ${esc(n)}</label>`).join('');
  }
}
// One listener each, for every redraw of its boxes.
for (const id of Object.keys(chosen)) document.getElementById(id).addEventListener('change', e => { if (e.target.checked) chosen[id].add(e.target.value); else chosen[id].delete(e.target.value); });
const zonesFor = id => [...chosen[id]];

// ---- library ------------------------------------------------------------------------------------
const results = $('#lib-results');
function crumbs(list) { $('#crumbs').innerHTML = list.map(([label, fn], i) => i < list.length - 1 ? `<button type="button" class="linkish" data-crumb="${i}">${esc(label)}</button> › ` : `<span aria-current="page">${esc(label)}</span>`).join(''); crumbActions = list.map(x => x[1]); }
let crumbActions = [];
$('#crumbs').addEventListener('click', e => { const b = e.target.closest('[data-crumb]'); if (b) crumbActions[b.dataset.crumb](); });
function songRows(songs) {
  if (!songs.length) return '<p class="dim">no songs</p>';
  return `<ul class="list songs">${songs.map(s => `<li data-song="${esc(s.id)}"><span class="what"><span class="title">${esc(s.title)}</span> <span class="meta">${esc(s.artist || '')}${s.album ? ' — ' + esc(s.album) : ''} · ${fmt(s.durationSeconds)}</span></span>
    <span class="acts"><button type="button" data-play-song="${esc(s.id)}" aria-label="Play ${esc(s.title)}">Play</button><button type="button" data-next-song="${esc(s.id)}" aria-label="Play ${esc(s.title)} next">Play next</button><button type="button" data-add-song="${esc(s.id)}" aria-label="Add ${esc(s.title)} to the queue">Add to queue</button></span></li>`).join('')}</ul>`;
}
function albumRows(albums) {
  if (!albums.length) return '<p class="dim">no albums</p>';
  return `<ul class="list">${albums.map(a => `<li><span class="what"><button type="button" class="linkish" data-album="${esc(a.id)}">${esc(a.name)}</button> <span class="meta">${esc(a.artist || '')}${a.year ? ' · ' + a.year : ''}${a.songCount ? ' · ' + a.songCount + ' songs' : ''}</span></span>
    <span class="acts"><button type="button" data-play-album="${esc(a.id)}" aria-label="Play the album ${esc(a.name)}">Play</button></span></li>`).join('')}</ul>`;
}
function artistRows(artists) {
  if (!artists.length) return '<p class="dim">no artists</p>';
  return `<ul class="list">${artists.map(a => `<li><span class="what"><button type="button" class="linkish" data-artist="${esc(a.id)}">${esc(a.name)}</button> <span class="meta">${a.albumCount != null ? a.albumCount + ' albums' : ''}</span></span></li>`).join('')}</ul>`;
}
// One count for every view asked for (a load, a search, the search cleared): an answer is drawn only
// if no view was asked for after it, so a late one does not overwrite a newer view (album A's tracks
// shown after B was chosen, search results under "Artists").
let libSeq = 0, searchTimer = null;
// A view overtaken is no longer awaited: the results are busy only while the newest one is.
function navigate() { clearTimeout(searchTimer); results.removeAttribute('aria-busy'); return ++libSeq; }
async function load(what, path, draw) {
  const seq = navigate();
  results.setAttribute('aria-busy', 'true');
  try { const d = await api('GET', path); if (seq === libSeq) draw(d); } catch (e) { if (seq === libSeq) results.innerHTML = `<p class="err">${esc(what)} failed: ${esc(e.message)}</p>`; }
  finally { if (seq === libSeq) results.removeAttribute('aria-busy'); }
}
function showArtists() { crumbs([['Artists', showArtists]]); load('Loading the artists', '/api/v1/library/artists', d => { results.innerHTML = artistRows(d.artists); }); }
function showArtist(id) { load('Loading the artist', '/api/v1/library/artists/' + encodeURIComponent(id), d => { crumbs([['Artists', showArtists], [d.artist.name, () => showArtist(id)]]); results.innerHTML = `<h3>${esc(d.artist.name)}</h3>` + albumRows(d.artist.albums || []); }); }
function showAlbum(id) { load('Loading the album', '/api/v1/library/albums/' + encodeURIComponent(id), d => { const a = d.album; const path = [['Artists', showArtists]]; if (a.artistId) path.push([a.artist || 'artist', () => showArtist(a.artistId)]); path.push([a.name, () => showAlbum(id)]); crumbs(path);
  results.innerHTML = `<div class="row"><h3>${esc(a.name)} <span class="dim">${esc(a.artist || '')}${a.year ? ' · ' + a.year : ''}</span></h3><button type="button" class="primary" data-play-album="${esc(a.id)}">Play album</button></div>` + songRows(a.songs || []); }); }
function showPlaylists() { crumbs([['Playlists', showPlaylists]]); load('Loading the playlists', '/api/v1/library/playlists', d => { results.innerHTML = d.playlists.length ? `<ul class="list">${d.playlists.map(p => `<li><span class="what"><button type="button" class="linkish" data-playlist="${esc(p.id)}">${esc(p.name)}</button> <span class="meta">${p.songCount ?? ''} songs</span></span><span class="acts"><button type="button" data-play-playlist="${esc(p.id)}" aria-label="Play the playlist ${esc(p.name)}">Play</button></span></li>`).join('')}</ul>` : '<p class="dim">no playlists</p>'; }); }
function showPlaylist(id) { load('Loading the playlist', '/api/v1/library/playlists/' + encodeURIComponent(id), d => { crumbs([['Playlists', showPlaylists], [d.playlist.name, () => showPlaylist(id)]]); results.innerHTML = `<div class="row"><h3>${esc(d.playlist.name)}</h3><button type="button" class="primary" data-play-playlist="${esc(id)}">Play playlist</button></div>` + songRows(d.playlist.songs || []); }); }
let randomSongs = [];
function showRandom() { crumbs([['Random', showRandom]]); load('Loading random songs', '/api/v1/library/random?size=20', d => { randomSongs = d.songs; results.innerHTML = `<div class="row"><button type="button" class="primary" id="play-random">Play these ${d.songs.length}</button><button type="button" id="more-random">Others</button></div>` + songRows(d.songs); }); }
$('#search').addEventListener('input', () => {
  navigate();
  const q = $('#search').value.trim();
  if (!q) { showArtists(); return; }
  searchTimer = setTimeout(() => {
    const seq = navigate();
    crumbs([['Search: ' + q, () => {}]]);
    results.setAttribute('aria-busy', 'true');
    api('GET', '/api/v1/library/search?q=' + encodeURIComponent(q)).finally(() => { if (seq === libSeq) results.removeAttribute('aria-busy'); }).then(d => {
      if (seq !== libSeq) return;
      results.innerHTML = (d.artists.length ? '<h3>Artists</h3>' + artistRows(d.artists) : '') + (d.albums.length ? '<h3>Albums</h3>' + albumRows(d.albums) : '') + '<h3>Songs</h3>' + songRows(d.songs);
      say(`${d.songs.length} songs, ${d.albums.length} albums, ${d.artists.length} artists found`);
    }).catch(e => { if (seq === libSeq) results.innerHTML = `<p class="err">Search failed: ${esc(e.message)}</p>`; });
  }, 250);
});
$('#lib-artists').addEventListener('click', showArtists);
$('#lib-playlists').addEventListener('click', showPlaylists);
$('#lib-random').addEventListener('click', showRandom);
async function play(what, selection) {
  const zones = zonesFor('play-on');
  const r = await act(what, 'POST', '/api/v1/music/play', zones.length ? {...selection, zones} : selection);
  if (r) notify(`${what}: ${r.status} (${r.id})${r.skipped ? ', skipped ' + r.skipped : ''}`, true);
}
results.addEventListener('click', async e => {
  const b = e.target.closest('button'); if (!b) return;
  const d = b.dataset;
  if (d.artist) showArtist(d.artist);
  else if (d.album) showAlbum(d.album);
  else if (d.playlist) showPlaylist(d.playlist);
  else if (d.playSong) play('Play', {songs: [d.playSong]});
  else if (d.playAlbum) play('Play album', {album: d.playAlbum});
  else if (d.playPlaylist) play('Play playlist', {playlist: d.playPlaylist});
  else if (d.nextSong || d.addSong) {
    const r = await act(d.nextSong ? 'Play next' : 'Add to queue', 'POST', '/api/v1/music/queue/add', {songs: [d.nextSong || d.addSong], next: !!d.nextSong});
    if (r) { notify(`${d.nextSong ? 'Plays next' : 'Added to the queue'} (${r.songs.length} in the queue)`, true); renderQueue(r); }
  } else if (b.id === 'play-random') play('Play random', {songs: randomSongs.map(s => s.id)});
  else if (b.id === 'more-random') showRandom();
});

// ---- queue --------------------------------------------------------------------------------------
// The queue as last shown: its edits name the source and the song they were made on, so an edit on a
// list another client changed meanwhile is refused (409), not made on whatever track is there now.
let shownQueue = null, queueSeq = 0;
function renderQueue(q) {
  // Shown now (an edit's answer too): a load asked before it and answered after it is older.
  queueSeq++;
  shownQueue = q;
  if (!q) { $('#queue-info').textContent = 'Nothing is playing from the music server.'; $('#queue-list').innerHTML = ''; return; }
  $('#queue-info').textContent = `${q.songs.length} tracks in ${q.id}` + (q.restarted ? ' (the stream restarted)' : '');
  $('#queue-list').innerHTML = q.songs.map((s, i) => `<li data-index="${i}" data-song="${esc(s.id)}" ${i === q.current ? 'aria-current="true"' : ''}><span class="what">${i === q.current ? '<span class="now">▶ now playing</span> ' : ''}<span class="title">${esc(s.title)}</span> <span class="meta">${esc(s.artist || '')} · ${fmt(s.durationSeconds)}</span></span>
    <span class="acts"><button type="button" data-q="jump" aria-label="Play ${esc(s.title)} now">Play</button><button type="button" data-q="up" aria-label="Move ${esc(s.title)} up" ${i === 0 ? 'disabled' : ''}>↑</button><button type="button" data-q="down" aria-label="Move ${esc(s.title)} down" ${i === q.songs.length - 1 ? 'disabled' : ''}>↓</button><button type="button" data-q="remove" aria-label="Remove ${esc(s.title)}">Remove</button></span></li>`).join('');
  $('#queue-list').classList.add('list');
}
// Another client's edit (another phone, batonctl, MQTT) publishes no event: the queue shown is
// compared with what the status says of the newest server music (its id, its length, the track
// heard, the number of edits made to it: a move changes neither of the others) and read again when
// they differ — once per difference seen, not at every poll while the answer and the status disagree.
let queueAsked = null;
function queueFollows(s) {
  const m = s.sources.filter(x => x.class === 'music' && x.queueLength != null).sort((a, b) => +b.id.split('-').pop() - +a.id.split('-').pop())[0];
  const now = m ? `${m.id}|${m.queueLength}|${m.trackIndex ?? ''}|${m.queueVersion ?? ''}` : '';
  const shown = shownQueue ? `${shownQueue.id}|${shownQueue.songs.length}|${m && m.trackIndex != null ? shownQueue.current : ''}|${m && m.queueVersion != null ? shownQueue.version : ''}` : '';
  if (now === shown) { queueAsked = null; return; }
  if (now === queueAsked) return;
  queueAsked = now;
  loadQueue();
}
// Each load numbered (as the library's views are): an answer to an earlier one (a track event, the
// tab opened) that comes after a later one's is dropped — drawn, it put the list as it was back, and
// the status, unchanged, asked for nothing more. A load that fails, or whose answer is dropped, is
// asked again at the next status that still differs: kept as asked, one lost answer left the tab
// stale until the status changed (a dropped one too: the list drawn after it was asked may be older,
// an edit's answer made before another client's add).
async function loadQueue() {
  const seq = ++queueSeq;
  const dropped = () => { queueAsked = null; };
  try { const q = await api('GET', '/api/v1/music/queue'); if (seq === queueSeq) renderQueue(q); else dropped(); }
  catch (e) {
    if (seq !== queueSeq) { dropped(); return; }
    if (/no music/.test(e.message)) { renderQueue(null); return; }
    queueAsked = null;
    notify('Loading the queue failed: ' + e.message);
  }
}
$('#queue-refresh').addEventListener('click', loadQueue);
$('#queue-clear').addEventListener('click', async () => { const r = await act('Clear the queue', 'POST', '/api/v1/music/queue/clear', shownQueue ? {id: shownQueue.id} : undefined); if (r) renderQueue(r); else loadQueue(); });
$('#queue-list').addEventListener('click', async e => {
  const b = e.target.closest('button[data-q]'); if (!b) return;
  const i = Number(b.closest('li').dataset.index);
  const seen = {song: b.closest('li').dataset.song, ...(shownQueue ? {id: shownQueue.id} : {})};
  const op = b.dataset.q;
  const r = op === 'jump' ? await act('Jump', 'POST', '/api/v1/music/queue/jump', {index: i, ...seen})
    : op === 'remove' ? await act('Remove', 'POST', '/api/v1/music/queue/remove', {index: i, ...seen})
    : await act('Move', 'POST', '/api/v1/music/queue/move', {from: i, to: op === 'up' ? i - 1 : i + 1, ...seen});
  if (!r) { loadQueue(); return; }  // refused (the queue changed meanwhile?): show it as it is now
  renderQueue(r);
  const li = $(`#queue-list li[data-index="${op === 'up' ? i - 1 : op === 'down' ? i + 1 : i}"] button[data-q="${op}"]`);
  if (li && !li.disabled) li.focus();
});

// ---- announce -----------------------------------------------------------------------------------
async function loadSounds() {
  try {
    const d = await api('GET', '/api/v1/sounds');
    $('#sound-buttons').innerHTML = d.sounds.map(n => `<button type="button" data-sound="${esc(n)}">${esc(n)}</button>`).join('') || '<span class="dim">no sounds</span>';
    // Files of the sounds directory batond does not offer (a name to rename): said, not left to vanish.
    const ignored = Array.isArray(d.ignored) ? d.ignored : [];
    $('#sounds-ignored').innerHTML = ignored.map(x => `<li><b>${esc(x.file)}</b> is not offered: ${esc(x.why)}</li>`).join('');
    $('#sounds-ignored').hidden = !ignored.length;
  } catch (e) { notify('Loading the sounds failed: ' + e.message); }
}
async function announce(what, body) {
  const zones = zonesFor('announce-on');
  const r = await act(what, 'POST', '/api/v1/announce', zones.length ? {...body, zones} : body);
  if (r) notify(`${what}: ${r.status} (${r.id})${r.into ? ' into ' + r.into : ''}${r.skipped ? ', skipped ' + r.skipped : ''}`, true);
}
$('#sound-buttons').addEventListener('click', e => { const b = e.target.closest('button[data-sound]'); if (b) announce('Announce ' + b.dataset.sound, {sound: b.dataset.sound}); });
$('#speak').addEventListener('submit', e => { e.preventDefault(); const text = $('#speak-text').value.trim(); if (!text) { notify('Speak failed: type a text first'); return; } announce('Speak', {text}); });

// ---- live: the event stream (EventSource reconnects by itself and sends Last-Event-ID) ----------
// Every event type the daemon publishes (an EventSource hands a named event only to its listeners):
// WebApp.swift writes them in from Baton's EventType where the comment stands.
const types = [/* event types */];
function connect(after) {
  if (es) es.close();
  es = new EventSource('/api/v1/events?after=' + after);
  es.onopen = () => { conn('live', 'live'); refreshSoon(); };
  es.onerror = () => {
    conn('reconnecting…', 'down');
    // A stream the server closed for good (a restart, a lost session) is opened again from the last event seen.
    if (es.readyState === 2) setTimeout(async () => { try { const s = await api('GET', '/api/v1/session'); if (s.authenticated) connect(lastSeq); else showLogin(); } catch (e) { connect(lastSeq); } }, 1500);
  };
  const onEvent = m => {
    let e; try { e = JSON.parse(m.data); } catch (x) { return; }
    if (e.seq != null) { if (e.seq <= lastSeq) return; if ((lastSeq === 0 && e.seq > 1) || afterGap) since = e.uptimeMs; afterGap = false; lastSeq = e.seq; }
    events.push(e); if (events.length > 3000) { events.splice(0, 1000); since = events[0].uptimeMs; }
    const d = document.createElement('div'); d.className = 'ev ev-' + e.type;
    d.textContent = `${(e.time || '').slice(11, 23)} ${e.type} ${e.source || ''}${e.zones ? ' [' + e.zones.join(',') + ']' : ''}${e.shouldResume != null ? ' shouldResume=' + e.shouldResume : ''} — ${e.reason || e.message || ''}`;
    const log = $('#events'); log.prepend(d); while (log.childElementCount > 500) log.lastChild.remove();
    // The queue shown changes with the track heard, and is gone when its music ends.
    if (['track', 'finished', 'lost-for-good'].includes(e.type) && !$('#queue').hidden) loadQueue();
    if (e.type === 'reloaded') reloaded();
    refreshSoon();
  };
  types.forEach(t => es.addEventListener(t, onEvent));
  // batond no longer kept some events this page had not seen (it was away long, or read too slowly):
  // the timeline starts again from the next, and what the status says is heard is drawn from there.
  es.addEventListener('events-missed', m => {
    let g; try { g = JSON.parse(m.data); } catch (x) { return; }
    events.length = 0; heardSeen.length = 0; since = nowMs(); afterGap = true;
    const d = document.createElement('div'); d.className = 'ev ev-restart';
    d.textContent = `— ${g.count} events were missed (batond no longer keeps them): the timeline starts again here —`;
    const log = $('#events'); log.prepend(d);
    refreshSoon();
  });
  es.onmessage = onEvent;
}

// batond started again (a restart, an update): its event ids begin again at 1 and its uptime at 0, so
// the events of the run before are not this one's: the timeline forgets them, the log says so, and
// the stream is opened again from this run's first event (and the configuration read again).
function startedAgain() {
  lastSeq = 0; events.length = 0; heardSeen.length = 0; since = 0;
  const d = document.createElement('div'); d.className = 'ev ev-restart';
  d.textContent = '— batond started again: the events above are of its run before —';
  const log = $('#events'); log.prepend(d);
  reloaded();
  connect(0);
}

// ---- timeline: who was audible in each zone, rebuilt from the event log -------------------------
const WINDOW = 180000, colors = {}, palette = ['#3b82f6', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6', '#14b8a6', '#ec4899', '#84cc16'];
const color = id => colors[id] || (colors[id] = palette[Object.keys(colors).length % palette.length]);
let uptimeAt = Date.now();
// The uptime from which the page holds every event: before it (events batond no longer kept, or
// missed in a gap) a source's start is not known, and one the status says is heard is drawn from here.
let since = 0, afterGap = false;
const nowMs = () => status ? status.uptimeMs + (Date.now() - uptimeAt) : 0;
// What the status said is heard, each time it changed: `{t: its uptime, heard: Set of "zone|source"}`.
// A pause sends no event (nor does music fading under a chime end with one at its last frame heard):
// a bar ends where the status stopped listing its source, as it begins where the status lists it.
const heardSeen = [];
function noteHeard(s) {
  const heard = new Set(s.zones.flatMap(z => z.audible.map(id => z.name + '|' + id)));
  const last = heardSeen[heardSeen.length - 1];
  if (last && last.heard.size === heard.size && [...heard].every(k => last.heard.has(k))) return;
  heardSeen.push({t: s.uptimeMs, heard});
  if (heardSeen.length > 3000) heardSeen.splice(0, 1000);
}
// The bars follow what batond says is heard: an `audible` event opens one, and the events that end
// hearing close it (`buffering`, `muted`, `interruption-began`, `zone-unavailable`, `finished`,
// `lost-for-good`); each status (in time order with the events) closes what it does not list and
// opens what it does. A `granted` source is not heard yet (its stream may still connect).
function intervals() {
  const granted = {}, open = {}, out = [], marks = [];
  const startI = (z, id, t) => { const k = z + '|' + id; if (!(k in open)) open[k] = t; };
  const stopI = (z, id, t) => { const k = z + '|' + id; if (k in open) { out.push({zone: z, id, from: open[k], to: t}); delete open[k]; } };
  const seen = heardSeen.filter(h => h.t >= since);
  let i = 0, first = true;
  const statusUpTo = t => {
    for (; i < seen.length && seen[i].t <= t; i++, first = false) {
      const h = seen[i];
      for (const k of Object.keys(open)) if (!h.heard.has(k)) { const [z, id] = k.split('|'); stopI(z, id, h.t); }
      // Heard at the first status held but opened by no event: its start is older than what the
      // page knows, and it is drawn from there.
      for (const k of h.heard) if (!(k in open)) open[k] = first ? since : h.t;
    }
  };
  for (const e of events) {
    const t = e.uptimeMs, id = e.source;
    statusUpTo(t);
    const zs = e.zones || granted[id] || [];
    switch (e.type) {
      case 'granted': granted[id] = e.zones || []; break;
      case 'audible': (e.zones || []).forEach(z => startI(z, id, t)); break;
      case 'buffering': case 'muted': zs.forEach(z => stopI(z, id, t)); break;
      case 'zone-unavailable': for (const k of Object.keys(open)) { const [z, src] = k.split('|'); if (zs.includes(z)) stopI(z, src, t); } break;
      case 'interruption-began': zs.forEach(z => stopI(z, id, t)); marks.push({t, began: true, zones: zs}); break;
      case 'interruption-ended': marks.push({t, began: false, zones: zs}); break;
      case 'finished': case 'lost-for-good': zs.forEach(z => stopI(z, id, t)); delete granted[id]; break;
    }
  }
  statusUpTo(Infinity);
  const n = statusFailed && status ? status.uptimeMs : nowMs();
  for (const k in open) { const [z, id] = k.split('|'); out.push({zone: z, id, from: open[k], to: n, open: !statusFailed}); }
  return {out, marks};
}
function drawTimeline() {
  if (!status) return;
  const svg = $('#timeline-svg'), W = svg.clientWidth || 900, rowH = 22, left = 90, names = status.zones.map(z => z.name), h = names.length * rowH + 18, now = nowMs();
  svg.setAttribute('height', h);
  let out = ''; const {out: bars, marks} = intervals();
  const x = t => left + (W - left - 10) * Math.max(0, 1 - (now - t) / WINDOW);
  names.forEach((z, i) => {
    const y = i * rowH + 4;
    out += `<text x="4" y="${y + 14}" font-size="12">${esc(z)}</text><rect x="${left}" y="${y}" width="${W - left - 10}" height="${rowH - 6}" fill="#f1f3f5"/>`;
    const here = bars.filter(b => b.zone === z && b.to > now - WINDOW);
    here.forEach(b => {
      const over = here.filter(o => o.from < b.to && o.to > b.from), lanes = over.length, lane = over.indexOf(b);
      out += `<rect class="bar" data-source="${esc(b.id)}"${b.open ? ' data-open="true"' : ''} x="${x(b.from)}" y="${y + lane * (rowH - 6) / lanes}" width="${Math.max(1, x(b.to) - x(b.from))}" height="${(rowH - 6) / lanes}" fill="${color(b.id)}"><title>${esc(b.id)}</title></rect>`;
    });
    marks.filter(m => m.t > now - WINDOW && m.zones.includes(z)).forEach(m => { out += `<text x="${x(m.t) - 4}" y="${y + (m.began ? 10 : rowH - 4)}" font-size="10" fill="#b42318">${m.began ? '▼' : '▲'}</text>`; });
  });
  out += `<text x="${left}" y="${h - 2}" font-size="10" fill="#5f6b76">−3 min</text><text x="${W - 40}" y="${h - 2}" font-size="10" fill="#5f6b76">now</text>`;
  const legend = [...new Set(bars.map(b => b.id))].slice(-8).map(id => `<tspan fill="${color(id)}">■</tspan> ${esc(id)}`).join('  ');
  svg.innerHTML = out + `<text x="${left + 60}" y="${h - 2}" font-size="10">${legend}</text>`;
}
// The session cookie lasts 30 days from the last GET /api/v1/session: asked every hour, a page left
// open (a wall tablet) stays logged in while it is open, not 30 days after it was loaded.
async function keepSession() {
  if ($('#main').hidden) return;
  let s;
  try { s = await api('GET', '/api/v1/session'); } catch (e) { return; }  // the status poll says batond is away
  if (!s.authenticated) showLogin(); else if (s.csrf) csrf = s.csrf;
}
setInterval(keepSession, 3600000);
// Polled while the page is shown, also when no status has come yet: one bad answer must not end it.
setInterval(() => { if (!$('#main').hidden) refresh(); }, 1000);
setInterval(drawTimeline, 500);
document.addEventListener('visibilitychange', () => { if (!document.hidden) refreshSoon(); });
start();
