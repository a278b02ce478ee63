// Light and dark themes. The page follows the system's prefers-color-scheme until the Dark button
// is pressed; the choice is then kept in this browser (localStorage "attnlab.theme") as
// <html data-theme="light|dark">, and pressing it back to what the system asks for forgets it, so the
// page follows the system again. Colours live in CSS custom properties (style.css); canvases and
// Chart.js read them through cssVar() whenever the theme changes, via onTheme().

const KEY = 'attnlab.theme';
const listeners = new Set();
const hasDom = typeof document !== 'undefined' && typeof window !== 'undefined';
const media = hasDom && window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;

export function systemTheme() { return media && media.matches ? 'dark' : 'light'; }

export function storedTheme() {
  try { const t = localStorage.getItem(KEY); return t === 'dark' || t === 'light' ? t : null; } catch { return null; }
}

// The theme in force: an explicit choice, else the system's.
export function currentTheme() {
  if (!hasDom) return 'light';
  const t = document.documentElement.dataset.theme;
  return t === 'dark' || t === 'light' ? t : systemTheme();
}

export function isDark() { return currentTheme() === 'dark'; }

export function cssVar(name, fallback = '') {
  if (!hasDom) return fallback;
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

function notify() {
  const t = currentTheme();
  for (const f of [...listeners]) {
    try { f(t); } catch (e) { console.warn('theme listener failed', e); }
  }
}

// theme: 'dark', 'light', or null to follow the system.
export function setTheme(theme) {
  if (theme && theme === systemTheme()) theme = null;
  try { if (theme) localStorage.setItem(KEY, theme); else localStorage.removeItem(KEY); } catch { /* private mode */ }
  if (theme) document.documentElement.dataset.theme = theme; else delete document.documentElement.dataset.theme;
  notify();
}

export function toggleTheme() { setTheme(currentTheme() === 'dark' ? 'light' : 'dark'); }

// f(theme) after every change (button or system); returns the unsubscribe function.
export function onTheme(f) { listeners.add(f); return () => listeners.delete(f); }

if (media) {
  const changed = () => { if (!storedTheme()) notify(); };
  if (media.addEventListener) media.addEventListener('change', changed); else if (media.addListener) media.addListener(changed);
}
