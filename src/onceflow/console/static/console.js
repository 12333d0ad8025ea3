// Live figures: every few seconds the page is fetched again and each [data-live] section
// replaced by its new version, unless the reader is typing or pressing something in it.
(function () {
  const seconds = 3;
  async function refresh() {
    const sections = document.querySelectorAll("[data-live][id]");
    if (!sections.length || document.hidden) return;
    const busy = document.activeElement && document.activeElement.closest("[data-live]");
    if (busy) return;
    try {
      const response = await fetch(location.href, { headers: { "X-Refresh": "1" } });
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const section of sections) {
        const fresh = page.getElementById(section.id);
        if (fresh) section.replaceWith(fresh);
      }
    } catch (error) {
      // the console is stopping or the network dropped: the next round tries again
    }
  }
  setInterval(refresh, seconds * 1000);
})();
