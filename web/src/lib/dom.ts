// Small DOM helpers: element creation and the one floating tooltip of the page.

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

/** h('div', {class: 'x', onclick: fn}, 'text', child) */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children)
    if (c !== null && c !== undefined && c !== false)
      el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

let tooltipEl: HTMLDivElement | null = null;

/** Shows the page's tooltip next to the pointer with plain-text lines. */
export function showTooltip(clientX: number, clientY: number, lines: string[]): void {
  if (!tooltipEl) {
    tooltipEl = h('div', { class: 'tooltip', role: 'status', 'aria-live': 'polite' });
    document.body.appendChild(tooltipEl);
  }
  clear(tooltipEl);
  lines.forEach((line, i) => tooltipEl!.appendChild(h(i === 0 ? 'strong' : 'div', {}, line)));
  tooltipEl.style.display = 'block';
  const pad = 14;
  const w = tooltipEl.offsetWidth,
    ht = tooltipEl.offsetHeight;
  const x = clientX + pad + w > window.innerWidth ? clientX - pad - w : clientX + pad;
  const y = clientY + pad + ht > window.innerHeight ? clientY - pad - ht : clientY + pad;
  tooltipEl.style.left = `${Math.max(0, x)}px`;
  tooltipEl.style.top = `${Math.max(0, y)}px`;
}

export function hideTooltip(): void {
  if (tooltipEl) tooltipEl.style.display = 'none';
}

/** A canvas sized in CSS pixels and backed at the screen's pixel density. */
export function sizeCanvas(canvas: HTMLCanvasElement, width: number, height: number): CanvasRenderingContext2D {
  const dpr = Math.min(3, window.devicePixelRatio || 1);
  canvas.width = Math.max(1, Math.round(width * dpr));
  canvas.height = Math.max(1, Math.round(height * dpr));
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext('2d')!;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

/** Touch has no hover. Follows the kind of the last pointer on `el` ('mouse', 'touch', 'pen'),
 *  so that a view can make a first tap show what hovering shows and a second tap act. */
export function pointerKind(el: HTMLElement): () => string {
  let kind = 'mouse';
  const note = (e: PointerEvent) => {
    kind = e.pointerType;
  };
  el.addEventListener('pointerdown', note);
  el.addEventListener('pointermove', note);
  return () => kind;
}

/** A pointer position in the canvas's drawing coordinates (CSS pixels at its drawn size), also
 *  when the stylesheet shrinks the canvas to fit a narrow screen. */
export function canvasPoint(canvas: HTMLCanvasElement, e: MouseEvent): { x: number; y: number } {
  const r = canvas.getBoundingClientRect();
  const w = parseFloat(canvas.style.width) || r.width;
  const ht = parseFloat(canvas.style.height) || r.height;
  return {
    x: ((e.clientX - r.left) * w) / Math.max(1, r.width),
    y: ((e.clientY - r.top) * ht) / Math.max(1, r.height),
  };
}
