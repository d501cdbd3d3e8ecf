// Injected into every page by tests/check_browser.py (evaluated with awaitPromise).
// Returns {problems: [...], stats: {...}}. STRICT_MATH is replaced by true/false: at desktop width a
// display equation must fit the text column; at phone width a horizontal scroll container suffices.
(async () => {
  const STRICT_MATH = __STRICT_MATH__;
  const WIDTH = __WIDTH__;  // the emulated device width
  const STRICT_TABLES = __STRICT_TABLES__;  // an article page at desktop width: every table fits the column
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  if (document.fonts && document.fonts.ready) await document.fonts.ready;
  await Promise.all([...document.images].map(img => img.complete ? null :
    new Promise(resolve => { img.onload = img.onerror = resolve; })));
  await new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)));

  const problems = [];
  const notes = [];  // content that scrolls inside its column (allowed): printed with --verbose
  const stats = {tables: 0, figures: 0, equations: 0, scrolling: 0};
  const images = [];
  const article = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
  const box = article.getBoundingClientRect();
  const style = getComputedStyle(article);
  const colLeft = box.left + parseFloat(style.paddingLeft);
  const colRight = box.right - parseFloat(style.paddingRight);
  const slack = 1.5;

  const describe = (el) => {
    const text = (el.innerText || el.getAttribute("alt") || el.textContent || "").replace(/\s+/g, " ").trim();
    const heading = (() => {
      // The nearest section heading above the element, to find it in the page.
      let node = el;
      while (node && node !== article) {
        if (node.tagName === "SECTION") {
          const h = node.querySelector("h1, h2, h3, h4");
          if (h) return h.textContent.replace(/[#¶]/g, "").trim();
        }
        node = node.parentElement;
      }
      return "";
    })();
    const number = el.closest(".math") && el.closest(".math").querySelector(".eqno");
    const label = number ? number.textContent.replace(/[#¶]/g, "").trim() + " " : "";
    return `${label}[${heading.slice(0, 60)}] ${text.slice(0, 70)}`;
  };

  // The nearest ancestor (inside the article) that clips or scrolls horizontally.
  const clipper = (el) => {
    for (let node = el.parentElement; node && node !== article; node = node.parentElement) {
      const ox = getComputedStyle(node).overflowX;
      if (ox === "auto" || ox === "scroll") return {node, scrolls: true};
      if (ox === "hidden" || ox === "clip") return {node, scrolls: false};
    }
    return null;
  };

  const extent = (el) => {
    const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, width: r.width};
  };

  const checkWide = (el, kind, strict) => {
    const e = extent(el);
    if (!e.width) return;
    const c = clipper(el);
    // The space the element has: the column, or its clipping or scrolling container if narrower.
    let boxLeft = colLeft, boxRight = colRight;
    if (c) {
      const r = c.node.getBoundingClientRect();
      boxLeft = Math.max(boxLeft, r.left + c.node.clientLeft);
      boxRight = Math.min(boxRight, r.left + c.node.clientLeft + c.node.clientWidth);
    }
    if (e.right <= boxRight + slack && e.left >= boxLeft - slack) return;
    const what = `${kind} ${Math.round(e.width)} px wide in ${Math.round(boxRight - boxLeft)} px ` +
                 `(column ${Math.round(colRight - colLeft)} px): ${describe(el)}`;
    if (c && c.scrolls) {
      const r = c.node.getBoundingClientRect();
      if (r.right <= colRight + slack && r.left >= colLeft - slack) {
        stats.scrolling += 1;
        notes.push(`${what} (scrolls)`);
        if (strict) problems.push(`${what} (scrolls; should fit at this width)`);
        return;
      }
    }
    problems.push(`${what} (${c && !c.scrolls ? "cut at the edge" : "overflows the column"} without a scroll cue)`);
  };

  for (const table of article.querySelectorAll("table")) {
    stats.tables += 1;
    checkWide(table, "table", STRICT_TABLES);
  }
  // The math itself (mjx-math), inside MathJax's container, which scrolls when the math is wider.
  for (const eq of article.querySelectorAll('mjx-container[display="true"] > mjx-math')) {
    stats.equations += 1;
    checkWide(eq, "equation", STRICT_MATH);
  }
  for (const img of article.querySelectorAll("img")) {
    stats.figures += 1;
    checkWide(img, "figure", false);
    const alt = (img.getAttribute("alt") || "").trim();
    const src = img.getAttribute("src") || "";
    if (!alt || /^[0-9a-f]{16,}(\.\w+)?$/i.test(alt) || alt === src.split("/").pop() || /\.(png|jpe?g|svg|gif)$/i.test(alt)) {
      problems.push(`figure without alt text (alt="${alt.slice(0, 40)}"): ${src.split("/").pop()} ${describe(img)}`);
    }
    if (!img.closest("a[href]")) {
      problems.push(`figure that does not open at full size (no link around it; book.js adds one): ${describe(img)}`);
    }
    // The text size inside the image is read from the file by check_browser.py.
    const source = img.getAttribute("src") || "";
    images.push({src: source.startsWith("data:") ? source : new URL(source, location.href).pathname, natural: img.naturalWidth,
                 shown: img.getBoundingClientRect().width, where: describe(img)});
  }
  for (const el of article.querySelectorAll("svg, iframe, video")) {
    if (el.closest("mjx-container")) continue;
    checkWide(el, el.tagName.toLowerCase(), false);
  }

  // Raw LaTeX and raw MyST syntax in visible text (code, typeset math and scripts excluded).
  const SKIP = "script, style, pre, code, kbd, samp, textarea, mjx-container, mjx-assistive-mml, .highlight, .cell_input, .MathJax, .visually-hidden, .sr-only";
  const RAW = [
    [/\$\$|\$[^$\n]{0,200}?[\\^_{}][^$\n]{0,200}?\$/, "raw $...$ math"],
    [/\\[\(\)\[\]]/, "raw \\( \\) or \\[ \\] math"],
    [/\\(frac|text|math\w*|hat|bar|tilde|sum|int|prod|sqrt|left|right|begin|end|alpha|beta|gamma|delta|epsilon|theta|lambda|mu|sigma|tau|pi|log|exp|in|le|ge|leq|geq|times|cdot|nabla|partial|operatorname|mid|%)(?![A-Za-z])/, "raw LaTeX command"],
    [/\{(glue|cite|ref|eq|numref|doc|math|download|term|abbr|sub|sup)(:[\w:-]+)?\}`/, "raw MyST role"],
    [/(```|:::)\s*\{[\w:-]+\}|^\s*\{(literalinclude|glue:figure|figure|code-cell|bibliography|math|note|warning|admonition)\}/, "raw MyST directive"],
    [/```/, "raw Markdown fence"],
  ];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      const parent = node.parentElement;
      if (!parent || parent.closest(SKIP)) return NodeFilter.FILTER_REJECT;
      return node.nodeValue.trim() ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
    },
  });
  const seen = new Set();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.nodeValue;
    for (const [pattern, name] of RAW) {
      const m = text.match(pattern);
      if (m) {
        const at = Math.max(0, m.index - 40);
        const key = name + text.slice(at, m.index + 40);
        if (seen.has(key)) continue;
        seen.add(key);
        problems.push(`${name} in the page text: "…${text.slice(at, m.index + 40).replace(/\s+/g, " ")}…"`);
      }
    }
  }
  for (const [pattern, name] of RAW) {
    if (pattern.test(document.title)) problems.push(`${name} in the page title: "${document.title}"`);
  }

  // The page itself must not scroll sideways.
  // (On a phone the browser widens the layout viewport to fit wide content, so compare with the device.)
  const pageWidth = Math.max(document.documentElement.scrollWidth, window.innerWidth);
  if (pageWidth > WIDTH + 1) {
    // Name the outermost elements that stick out of the window and are not inside a container that
    // clips or scrolls them.
    const culprits = [];
    const clipped = (el) => {
      for (let node = el.parentElement; node && node !== document.body; node = node.parentElement) {
        if (getComputedStyle(node).overflowX !== "visible") return true;
      }
      return false;
    };
    for (const el of document.querySelectorAll("article *")) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.right <= WIDTH + 1) continue;
      const parent = el.parentElement.getBoundingClientRect();
      if (parent.right > WIDTH + 1 && el.parentElement.closest("article")) continue;
      if (clipped(el)) continue;
      culprits.push(`${el.tagName.toLowerCase()}.${[...el.classList].join(".")} to ${Math.round(r.right)} px: ${describe(el)}`);
      if (culprits.length >= 3) break;
    }
    problems.push(`the page scrolls sideways: ${pageWidth} px of content in a ${WIDTH} px window` +
                  (culprits.length ? `; sticking out: ${culprits.join("; ")}` : ""));
  }
  stats.column = Math.round(colRight - colLeft);
  stats.height = document.documentElement.scrollHeight;
  const verdicts = article.querySelector("table.verdict-table");
  const verdictTop = verdicts ? Math.round(verdicts.getBoundingClientRect().top + window.scrollY) : null;
  return {problems, stats, notes, images, verdictTop};
})()
