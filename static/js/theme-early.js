// Loaded as a classic script in <head>, before the style sheet is applied to the body, so a stored
// theme choice is in force from the first paint (no light flash on a dark page). theme.js does the rest.
(function () {
  try {
    var t = localStorage.getItem('attnlab.theme');
    if (t === 'dark' || t === 'light') document.documentElement.dataset.theme = t;
  } catch (e) { /* storage unavailable: follow the system */ }
})();
