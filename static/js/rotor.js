// One RoPE pair turning, drawn for the classroom: the query at position m and the key at position
// n = m + gap both rotate by their position times θ_i. As the animation slides both positions along,
// each arrow spins but the angle between them, gap·θ_i, never changes: the score sees only the gap.
import { h, fmt } from './dom.js';
import { themed } from './colors.js';
import { cssVar, onTheme } from './theme.js';

// A range input with its label and value; changed(name) after the state has taken its value.
function rotorSlider(state, name, label, min, max, step, changed) {
  const inp = h('input', { type: 'range', id: `rotor-${name}`, min, max, step, value: state[name] });
  const out = h('output', { for: `rotor-${name}` }, String(state[name]));
  inp.addEventListener('input', () => {
    state[name] = Number(inp.value);
    out.textContent = String(state[name]);
    changed(name);
  });
  return [inp, h('div.param', {}, h('label', { for: `rotor-${name}` }, label), h('div.param-inputs', {}, inp, out))];
}

// One arrow from the centre (g: { cx, cy, R }) at angle a, with its head and its label beyond it.
function drawArrow(ctx, g, a, col, label, big) {
  const { cx, cy, R } = g;
  const x = cx + R * Math.cos(a), y = cy - R * Math.sin(a);
  ctx.strokeStyle = col; ctx.fillStyle = col; ctx.lineWidth = 4;
  ctx.beginPath(); ctx.moveTo(cx, cy); ctx.lineTo(x, y); ctx.stroke();
  const hd = 14, ang = Math.atan2(y - cy, x - cx);
  ctx.beginPath(); ctx.moveTo(x, y);
  ctx.lineTo(x - hd * Math.cos(ang - 0.4), y - hd * Math.sin(ang - 0.4));
  ctx.lineTo(x - hd * Math.cos(ang + 0.4), y - hd * Math.sin(ang + 0.4)); ctx.fill();
  ctx.font = `bold ${big ? 24 : 18}px system-ui, sans-serif`;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  ctx.fillText(label, cx + (R + 18) * Math.cos(a), cy - (R + 18) * Math.sin(a));
}

function rotorReadout(state, theta) {
  const diff = ((state.gap * theta) % (2 * Math.PI) + 2 * Math.PI) % (2 * Math.PI);
  return `θ_${state.pair} = ${state.base}^(−2·${state.pair}/${state.d}) = ${fmt(theta, 4)} rad per position · ` +
    `q turned ${fmt(state.m * theta, 3)} rad, k turned ${fmt((state.m + state.gap) * theta, 3)} rad · ` +
    `angle between them: gap·θ = ${fmt(state.gap * theta, 4)} rad (${fmt((diff * 180) / Math.PI, 3)}°), whatever m is.`;
}

// The pair at the state's position: circle and axes, the angle between, both arrows, the legend.
function drawRotor(canvas, readout, state) {
  const ctx = canvas.getContext('2d');
  const W = canvas.width, H = canvas.height, cx = W / 2, cy = H / 2, R = Math.min(W, H) * 0.33;
  const theta = Math.pow(state.base, (-2 * state.pair) / state.d);
  const q0 = 0.35, k0 = 1.6; // the pair's own angles before rotation (arbitrary content)
  const aq = q0 + state.m * theta, ak = k0 + (state.m + state.gap) * theta;
  ctx.clearRect(0, 0, W, H);
  ctx.strokeStyle = cssVar('--ref', '#bbb'); ctx.lineWidth = 1.5;
  ctx.beginPath(); ctx.arc(cx, cy, R, 0, 2 * Math.PI); ctx.stroke();
  ctx.beginPath(); ctx.moveTo(cx - R - 10, cy); ctx.lineTo(cx + R + 10, cy); ctx.moveTo(cx, cy - R - 10); ctx.lineTo(cx, cy + R + 10); ctx.stroke();
  // the angle between the two arrows
  ctx.strokeStyle = '#E69F00'; ctx.lineWidth = 6;
  ctx.beginPath(); ctx.arc(cx, cy, R * 0.35, -aq, -ak, ak > aq); ctx.stroke();
  const big = document.body.classList.contains('classroom');
  const qCol = themed('#0072B2'), kCol = themed('#D55E00');
  drawArrow(ctx, { cx, cy, R }, aq, qCol, 'q', big);
  drawArrow(ctx, { cx, cy, R }, ak, kCol, 'k', big);
  // Positions in a corner legend, where long numbers cannot run off the canvas.
  ctx.font = `${big ? 20 : 15}px system-ui, sans-serif`;
  ctx.textAlign = 'left';
  ctx.textBaseline = 'top';
  ctx.fillStyle = qCol;
  ctx.fillText(`q at position m = ${Math.floor(state.m)}`, 8, 8);
  ctx.fillStyle = kCol;
  ctx.fillText(`k at position n = ${Math.floor(state.m) + state.gap}`, 8, big ? 32 : 26);
  ctx.fillStyle = cssVar('--warn', '#8a5a00');
  ctx.textBaseline = 'bottom';
  ctx.fillText(`angle between: gap·θ = ${fmt(state.gap * theta, 3)} rad`, 8, H - 8);
  readout.textContent = rotorReadout(state, theta);
}

export function rotorPanel() {
  const canvas = h('canvas#rotor', { width: 420, height: 420, role: 'img',
    'aria-label': 'a rotary pair: query and key arrows turning together, the angle between them fixed' });
  const state = { d: 64, base: 10000, pair: 4, gap: 3, m: 0, speed: 1, playing: !window.matchMedia('(prefers-reduced-motion: reduce)').matches };
  const readout = h('p.rotor-readout', { 'aria-live': 'off' });
  const draw = () => drawRotor(canvas, readout, state);
  const changed = (name) => {
    if (name === 'd') { pairIn.max = String(state.d / 2 - 1); if (state.pair > state.d / 2 - 1) { state.pair = state.d / 2 - 1; pairIn.value = state.pair; pairIn.dispatchEvent(new Event('input')); } }
    draw();
  };
  const [, dRow] = rotorSlider(state, 'd', 'dimension d', 4, 128, 2, changed);
  const [pairIn, pairRow] = rotorSlider(state, 'pair', 'pair i', 0, 31, 1, changed);
  const [, gapRow] = rotorSlider(state, 'gap', 'gap n − m', 0, 32, 1, changed);
  const [, speedRow] = rotorSlider(state, 'speed', 'positions per second', 0.25, 8, 0.25, changed);
  const play = h('button#rotor-play', { type: 'button', 'aria-pressed': String(state.playing) }, state.playing ? 'Pause' : 'Play');
  const reset = h('button', { type: 'button' }, 'Back to m = 0');
  play.addEventListener('click', () => {
    state.playing = !state.playing;
    play.textContent = state.playing ? 'Pause' : 'Play';
    play.setAttribute('aria-pressed', String(state.playing));
    if (state.playing) { last = performance.now(); requestAnimationFrame(tick); }
  });
  reset.addEventListener('click', () => { state.m = 0; draw(); });

  let last = performance.now();
  function tick(now) {
    if (!state.playing || !canvas.isConnected) return;
    state.m += ((now - last) / 1000) * state.speed;
    last = now;
    draw();
    requestAnimationFrame(tick);
  }
  // Start once attached, so the first frame is not wasted on a detached canvas.
  queueMicrotask(() => { draw(); if (state.playing) { last = performance.now(); requestAnimationFrame(tick); } });
  // A paused rotor is redrawn in the other theme's colours; one whose panel has gone lets go.
  const unTheme = onTheme(() => { if (canvas.isConnected) draw(); else unTheme(); });
  return h('div.rotor', {},
    h('p', {}, 'Each pair of coordinates is a point on a plane. RoPE turns the query’s pair by m·θᵢ and the key’s by n·θᵢ. ' +
      'Slide both positions along (press Play): the arrows spin, the orange angle between them stays gap·θᵢ. ' +
      'That is why a rotary score depends on n − m only.'),
    h('div.rotor-body', {}, canvas, h('div.rotor-controls', {}, dRow, pairRow, gapRow, speedRow, h('div.toolbar', {}, play, reset))),
    readout);
}
