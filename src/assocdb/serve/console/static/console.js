// The console's live parts: the overview's section reloads itself every couple
// of seconds from a server-rendered fragment. Without this script the page
// is complete and a reload shows the same.
(function () {
  "use strict";
  function refresh(section) {
    var every = parseInt(section.getAttribute("data-every"), 10) || 2000;
    var tick = function () {
      fetch(section.getAttribute("data-src"), { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var main = doc.querySelector("main");
          if (main) { section.replaceChildren.apply(section, Array.from(main.childNodes)); }
          section.setAttribute("data-updated", String(Date.now()));
        })
        .catch(function () { section.setAttribute("data-stale", "1"); })
        .finally(function () { setTimeout(tick, every); });
    };
    setTimeout(tick, every);
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-src]").forEach(refresh);
  });
})();
