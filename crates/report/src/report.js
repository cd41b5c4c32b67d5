// Tessera's plan report: pages through the GPUs, drawing each page from
// the JSON beside this script (script.plan-data) exactly as tessera-report
// draws the first page in Rust (draw.rs, gpu_pages.rs), and filters the
// GPUs and the service table by a search. Without it the page still shows
// the overview, the first page of GPUs and the whole table.
(() => {
  'use strict';
  const root = document.currentScript.parentElement;
  const data = JSON.parse(root.querySelector('script.plan-data').textContent);
  const [PAD, SLICE, MEMORY_TOP, MEMORY_BAND, COMPUTE_TOP, COMPUTE_BAND, AXIS_Y, HEIGHT, CHAR_WIDTH] = data.geometry;
  const section = root.querySelector('section.gpu-pages');
  const pager = section.querySelector('p.pager');
  const shown = pager.querySelector('.shown');
  const legend = section.querySelector('.legend');
  const view = section.querySelector('.gpu-page');
  const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  const esc = text => String(text).replace(/[&<>"']/g, c => ESCAPES[c]);
  const grouped = n => n.toLocaleString('en-US');
  // As tessera_core::text::count (node headings must match Rust's), and
  // with the number grouped for the search's counts.
  const plural = (n, noun) => (n === 1 ? `1 ${noun}` : `${n} ${noun}s`);
  const counted = (n, noun) => (n === 1 ? `1 ${noun}` : `${grouped(n)} ${noun}s`);

  const nodeGpus = new Map();
  for (const gpu of data.gpus) nodeGpus.set(gpu[0], (nodeGpus.get(gpu[0]) || 0) + 1);

  // The name cut to fit width px, as draw.rs's fit.
  function fit(text, width) {
    const room = Math.max(1, Math.floor((width - 8) / CHAR_WIDTH));
    const chars = Array.from(text);
    return chars.length <= room ? text : chars.slice(0, Math.max(room - 1, 0)).join('') + '…';
  }

  // A GPU's instances: [configuration, start] of each dedicated one, then
  // [shared instance, start] of each shared one (written -1 - k).
  function instancesOf(gpu) {
    const dedicated = [], shared = [];
    for (let i = 3; i < gpu.length; i += 2) {
      if (gpu[i] < 0) shared.push([data.shared[-1 - gpu[i]], gpu[i + 1]]);
      else dedicated.push([data.configs[gpu[i]], gpu[i + 1]]);
    }
    return [dedicated, shared];
  }

  // One tile, as draw.rs's write_tile.
  function tileSvg(attributes, [profileName, size, memory], start, [fill, strong], title, lines, x) {
    const [left, tileWidth] = [x(start), memory * SLICE];
    let s = `<g class="tile" ${attributes} data-profile="${esc(profileName)}" data-start="${start}" data-memory-slices="${memory}">`;
    s += `<rect x="${left}" y="${MEMORY_TOP}" width="${tileWidth}" height="${MEMORY_BAND}" rx="4" fill="${fill}"/>`;
    s += `<title>${title}</title>`;
    const texts = [[`<tspan class="profile">${esc(profileName)}</tspan>`, 16], [lines[0], 31], [lines[1], 46], [lines[2], 61]];
    for (const [text, dy] of texts) s += `<text class="tile-text" x="${left + 5}" y="${MEMORY_TOP + dy}">${text}</text>`;
    s += `<rect class="compute-used" x="${left}" y="${COMPUTE_TOP}" width="${size * SLICE}" height="${COMPUTE_BAND}" fill="${strong}"/>`;
    return s + '</g>';
  }

  // One GPU's figure, as draw.rs's write_gpu inside gpu_pages.rs's <svg>.
  function gpuSvg(gpu) {
    const [node, index, model] = gpu;
    const [display, memorySlices, computeSlices] = data.gpu_models[model];
    const [dedicated, shared] = instancesOf(gpu);
    const used = dedicated.reduce((sum, [config]) => sum + data.profiles[config[2]][1], 0) +
      shared.reduce((sum, [group]) => sum + data.profiles[group[0]][1], 0);
    const width = 2 * PAD + memorySlices * SLICE;
    const x = slice => PAD + slice * SLICE;
    let s = `<svg class="gpu" data-node="${node}" data-gpu="${index}" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${HEIGHT}" viewBox="0 0 ${width} ${HEIGHT}">`;
    s += `<text class="caption" x="${PAD}" y="13">node ${node} · GPU ${index} · ${esc(display)} · ${Math.max(0, computeSlices - used)} of ${computeSlices} compute slices free</text>`;
    for (let slice = 0; slice < memorySlices; slice++) {
      s += `<rect class="mem-slice" data-slice="${slice}" x="${x(slice)}" y="${MEMORY_TOP}" width="${SLICE}" height="${MEMORY_BAND}"/>`;
      s += `<text class="axis" x="${x(slice) + 3}" y="${AXIS_Y}">${slice}</text>`;
    }
    for (let slice = 0; slice < computeSlices; slice++) {
      s += `<rect class="compute-slice" data-slice="${slice}" x="${x(slice)}" y="${COMPUTE_TOP}" width="${SLICE}" height="${COMPUTE_BAND}"/>`;
    }
    for (const [[service, model, profile, batch, procs, throughput, latency], start] of dedicated) {
      const [nameIndex, swatch, util] = data.services[service];
      const name = data.names[nameIndex];
      const [profileName, , memory] = data.profiles[profile];
      const utilText = util === null ? 'util —' : `util ${util}%`;
      const title = `${esc(profileName)} on ${esc(name)} at memory slice ${start}: ${esc(name)} of ${esc(data.names[model])}, batch ${batch} × ${procs} processes, ${throughput} req/s, ${latency} ms per batch, ${utilText}`;
      s += tileSvg(`data-service="${esc(name)}"`, data.profiles[profile], start, data.swatches[swatch], title,
        [esc(fit(name, memory * SLICE)), `b${batch}×${procs}`, utilText], x);
    }
    for (const [[profile, members, label, sharing, busy, membersText], start] of shared) {
      const names = members.map(service => data.names[data.services[service][0]]);
      const [profileName, , memory] = data.profiles[profile];
      const title = `${esc(profileName)} at memory slice ${start}: ${esc(membersText)}`;
      s += tileSvg(`data-members="${esc(names.join(' '))}"`, data.profiles[profile], start, data.shared_swatch, title,
        [esc(fit(label, memory * SLICE)), sharing, busy], x);
    }
    return s + '</svg>';
  }

  // GPUs (positions in data.gpus, consecutive in plan order) grouped by node.
  function pageHtml(positions) {
    let s = '';
    for (let at = 0; at < positions.length;) {
      const node = data.gpus[positions[at]][0];
      const name = node < data.node_names.length ? ` (${esc(data.node_names[node])})` : '';
      s += `<section class="node" data-node="${node}"><h2>Node ${node}${name} <span class="muted">· ${plural(nodeGpus.get(node), 'GPU')}</span></h2><div class="gpus">`;
      for (; at < positions.length && data.gpus[positions[at]][0] === node; at++) s += gpuSvg(data.gpus[positions[at]]);
      s += '</div></section>';
    }
    return s;
  }

  // The legend of the services on positions' GPUs, by first appearance,
  // then the chip of shared instances where they have any.
  function legendHtml(positions) {
    const seen = new Set();
    let s = '';
    let anyShared = false;
    for (const position of positions) {
      const [dedicated, shared] = instancesOf(data.gpus[position]);
      anyShared = anyShared || shared.length > 0;
      for (const [[service]] of dedicated) {
        if (seen.has(service)) continue;
        seen.add(service);
        const [nameIndex, swatch] = data.services[service];
        const name = data.names[nameIndex];
        s += `<span data-service="${esc(name)}"><span class="chip" style="background:${data.swatches[swatch][0]}"></span>${esc(name)}</span>`;
      }
    }
    if (anyShared) s += `<span class="shared"><span class="chip" style="background:${data.shared_swatch[0]}"></span>${esc(data.shared_legend)}</span>`;
    return s;
  }

  // Paging: the GPUs on offer (every GPU, or those a search matched).
  let offered = data.gpus.map((_, position) => position);
  let query = '';
  let page = 0;
  const pages = () => Math.max(1, Math.ceil(offered.length / data.per_page));
  const controls = document.createElement('span');
  controls.className = 'controls';
  controls.innerHTML = '<button type="button" data-go="first" title="first page">«</button>' +
    '<button type="button" data-go="prev" title="previous page">‹</button>' +
    '<label>page <input type="number" class="page-number" min="1" value="1"></label> <span class="pages"></span>' +
    '<button type="button" data-go="next" title="next page">›</button>' +
    '<button type="button" data-go="last" title="last page">»</button>';
  pager.appendChild(controls);
  const pageInput = controls.querySelector('input.page-number');

  function show(to) {
    page = Math.min(Math.max(0, to), pages() - 1);
    const positions = offered.slice(page * data.per_page, (page + 1) * data.per_page);
    view.innerHTML = pageHtml(positions);
    legend.innerHTML = legendHtml(positions);
    const range = positions.length ? `GPUs ${grouped(page * data.per_page + 1)}–${grouped(page * data.per_page + positions.length)} of ` : 'no GPUs of ';
    const total = offered.length === data.gpus.length ? grouped(data.gpus.length) : `${grouped(offered.length)} holding services that match “${query}”`;
    shown.textContent = range + total;
    section.dataset.page = String(page + 1);
    pageInput.value = String(page + 1);
    pageInput.max = String(pages());
    controls.querySelector('.pages').textContent = `of ${grouped(pages())}`;
    controls.hidden = pages() < 2 && offered.length === data.gpus.length;
  }
  controls.addEventListener('click', event => {
    const go = event.target.dataset && event.target.dataset.go;
    if (!go) return;
    show({ first: 0, prev: page - 1, next: page + 1, last: pages() - 1 }[go]);
  });
  pageInput.addEventListener('change', () => show(Number(pageInput.value) - 1));
  section.dataset.page = '1';
  controls.hidden = pages() < 2;
  controls.querySelector('.pages').textContent = `of ${grouped(pages())}`;
  pageInput.max = String(pages());

  // Search: service names and models; the table's rows (at most
  // MAX_ROWS of them) and the GPUs follow.
  const MAX_ROWS = 1000;
  const list = root.querySelector('section.service-list');
  const search = list.querySelector('p.search');
  const input = search.querySelector('input');
  const found = search.querySelector('.found');
  const rows = Array.from(list.querySelectorAll('table.services tbody tr'));
  const blocks = Array.from(list.querySelectorAll('div.service-block'));
  search.hidden = false;
  let haystacks = null;
  function filter() {
    query = input.value.trim();
    const needle = query.toLowerCase();
    if (!haystacks) {
      haystacks = data.services.map(([name]) => [data.names[name].toLowerCase()]);
      for (const [service, model] of data.configs) haystacks[service].push(data.names[model].toLowerCase());
      rows.forEach((row, service) => haystacks[service].push(row.cells[1].textContent.toLowerCase()));
    }
    const matches = haystacks.map(words => needle === '' || words.some(word => word.includes(needle)));
    let count = 0;
    rows.forEach((row, service) => {
      if (matches[service]) count++;
      row.hidden = !matches[service] || (needle !== '' && count > MAX_ROWS);
    });
    list.classList.toggle('searching', needle !== '');
    blocks.forEach(block => { block.hidden = needle !== '' && !block.querySelector('tr:not([hidden])'); });
    found.textContent = needle === '' ? '' : `${grouped(count)} of ${counted(rows.length, 'service')}` +
      (count > MAX_ROWS ? ` (the first ${grouped(MAX_ROWS)} shown)` : '');
    offered = [];
    data.gpus.forEach((gpu, position) => {
      const [dedicated, shared] = instancesOf(gpu);
      if (dedicated.some(([[service]]) => matches[service]) ||
        shared.some(([[, members]]) => members.some(service => matches[service]))) offered.push(position);
    });
    if (needle === '') offered = data.gpus.map((_, position) => position);
    show(0);
  }
  let timer = 0;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(filter, 150);
  });
  root.tesseraReport = { show, filter };
})();
