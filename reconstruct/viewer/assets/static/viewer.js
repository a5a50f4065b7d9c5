// orchard view: enhancements only; every page works without this file.
(function () {
  "use strict";

  // Token pane: switch shading without a reload; show a token's details.
  function initPane(pane) {
    var info = pane.querySelector("#token-info");
    pane.querySelectorAll("a.mode").forEach(function (a) {
      a.addEventListener("click", function (ev) {
        ev.preventDefault();
        pane.className = pane.className.replace(/mode-\w+/, "mode-" + a.dataset.mode);
        pane.querySelectorAll("a.mode").forEach(function (b) { b.classList.toggle("on", b === a); });
      });
    });
    pane.addEventListener("mouseover", function (ev) {
      var t = ev.target.closest(".t");
      if (t && info) { info.textContent = t.title; }
    });
  }

  // Keyboard: j/k move through rows (list, rollouts, turns), Enter opens,
  // / focuses the search box.
  function initKeys() {
    var rows = Array.prototype.slice.call(document.querySelectorAll(".row"));
    var cur = rows.findIndex(function (r) { return r.classList.contains("sel"); });
    function move(d) {
      if (!rows.length) { return; }
      if (cur >= 0) { rows[cur].classList.remove("cur"); }
      cur = Math.max(0, Math.min(rows.length - 1, cur + d));
      rows[cur].classList.add("cur");
      rows[cur].scrollIntoView({ block: "nearest" });
    }
    document.addEventListener("keydown", function (ev) {
      var tag = (ev.target.tagName || "").toLowerCase();
      if (tag === "input" || tag === "select" || tag === "textarea" || ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
      if (ev.key === "j") { move(1); } else if (ev.key === "k") { move(-1); } else if (ev.key === "/") {
        ev.preventDefault();
        var s = document.getElementById("search");
        if (s) { s.focus(); }
      } else if (ev.key === "Enter" && cur >= 0 && rows[cur].dataset.href) {
        window.location.href = rows[cur].dataset.href;
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var pane = document.getElementById("tokens");
    if (pane) { initPane(pane); }
    initKeys();
    var f = document.querySelector(".t.f");
    if (f) { f.scrollIntoView({ block: "center" }); }
  });
})();
