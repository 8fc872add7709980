// "Head map": every head of the model as a point, placed by how alike its attention is to every
// other head's over a corpus (POST /api/head_map; Clark et al. 2019, docs/roles.md "Head map").
// The places do not depend on the explorer's text; the colours do: each point takes the colour of
// the head's primary role on the current text, and, once the importance of every head has been
// measured on that text, its size follows the head's ablation effect. Hovering (or tapping) a
// point shows the head's card; clicking it (a second tap on a phone) selects the head.

import { ApiError, type HeadMapResult, type HeadReport } from '../../lib/api';
import { h, pointerKind } from '../../lib/dom';
import { evidenceNote } from '../../lib/evidence';
import { sentenceCase } from '../../lib/format';
import { download, exportName } from '../../lib/export';
import { kvGroups } from '../../lib/kv-groups';
import { headName, layerName } from '../../lib/numbering';
import type { Scene, SceneItem } from '../../lib/scene';
import type { ViewState } from '../../lib/state';
import { THEME } from '../../lib/theme';
import { barFraction, rankText } from '../ablation/importance';
import { headReport, roleBadge, roleInfo, roleStyle, type ExportableView, type ViewContext } from '../context';
import {
  explainedText,
  headMapCsv,
  headMapJson,
  mapScale,
  nearestPoint,
  pointRadius,
  type MapScale,
} from './headmap-plot';

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Widest the picture is drawn, in CSS pixels. */
const MAX_WIDTH = 760;
/** Room around the outermost points. */
const PAD = 18;
/** A point's radius without importance. */
const RADIUS = 6;
/** How far from a point the pointer may be and still mean it (touch is coarse). */
const HIT = { mouse: 14, touch: 22 };

export interface HeadMapCallbacks {
  headMap(): Promise<HeadMapResult>;
  change(patch: Partial<ViewState>): void;
}

interface Drawn {
  px: number;
  py: number;
  r: number;
}

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** The explanation of closeness, in plain words. */
export const CLOSENESS_TEXT =
  'Two heads are close on this map when their attention rows look alike on the same sentences: for every word of every sentence of the corpus, the two heads’ rows (where each head looks from that word) are compared, and the differences averaged. The distance between two heads is the square root of the mean Jensen–Shannon divergence of their rows: 0 when they always look at the same places in the same proportions, 1 when they never look at the same words. The map flattens these distances onto two axes, so close points are heads that do similar work wherever they sit in the model; the axes themselves have no name.';

export class HeadMapView implements ExportableView {
  readonly el: HTMLElement;
  private status: HTMLElement;
  private body: HTMLElement;
  private summary: HTMLElement;
  private plot: HTMLElement;
  private picture: SVGSVGElement;
  private card: HTMLElement;
  private legend: HTMLElement;
  private evidence: HTMLElement;
  private sizeBox: HTMLInputElement;
  private sizeReason: HTMLElement;
  private ctx: ViewContext | null = null;
  private result: HeadMapResult | null = null;
  private drawn: Drawn[] = [];
  private scale: MapScale | null = null;
  private size = { width: MAX_WIDTH, height: 480 };
  /** The head under the pointer (or last tapped), layer-major; -1 for none. */
  private hovered = -1;
  private generation = 0;
  /** "Size by importance" as the reader left it (shown unticked while importance is not there). */
  private sizeWanted = true;
  private pointer: () => string;

  constructor(private readonly callbacks: HeadMapCallbacks) {
    this.status = h('p', { class: 'status', id: 'headmap-status', 'aria-live': 'polite' });
    this.summary = h('p', { id: 'headmap-summary' });
    this.picture = svg('svg', { id: 'headmap-svg', role: 'img', 'aria-label': 'every head of the model as a point' });
    this.plot = h('div', { class: 'headmap-plot' });
    this.plot.appendChild(this.picture);
    this.pointer = pointerKind(this.plot);
    this.wirePointer();
    this.card = h('div', { class: 'headmap-card', id: 'headmap-card', 'aria-live': 'polite' });
    this.legend = h('ul', { class: 'role-legend', id: 'headmap-legend' });
    this.evidence = h('div', { class: 'evidence-slot' });
    this.sizeBox = h('input', { type: 'checkbox', id: 'headmap-size', checked: true });
    this.sizeBox.addEventListener('change', () => {
      this.sizeWanted = this.sizeBox.checked;
      this.draw();
    });
    this.sizeReason = h('span', { class: 'muted small', id: 'headmap-size-reason' });
    this.body = this.layout();
    this.el = h(
      'section',
      { class: 'view headmap-view', 'aria-labelledby': 'headmap-title' },
      h('div', { class: 'view-head' }, h('h2', { id: 'headmap-title' }, 'Head map: which heads attend alike')),
      h(
        'p',
        { class: 'muted' },
        'Every head of the model is one point. Heads that spread their attention the same way over the same sentences sit close together; the colour is the head’s role on your text.',
      ),
      this.status,
      this.body,
    );
    window.addEventListener('resize', () => {
      if (this.result && !this.body.hidden && this.measure()) this.draw();
    });
  }

  private layout(): HTMLElement {
    return h(
      'div',
      { class: 'headmap-body', hidden: true },
      this.summary,
      h(
        'label',
        { class: 'control inline headmap-size' },
        this.sizeBox,
        h('span', {}, 'Size by importance'),
        this.sizeReason,
      ),
      h(
        'div',
        { class: 'headmap-layout' },
        this.plot,
        h(
          'div',
          { class: 'headmap-side' },
          this.card,
          h('h3', {}, 'Roles on this text'),
          this.legend,
          this.evidence,
          h('h3', {}, 'What closeness means'),
          h('p', { class: 'small', id: 'headmap-closeness' }, CLOSENESS_TEXT),
          h(
            'div',
            { class: 'headmap-downloads' },
            h(
              'button',
              { type: 'button', class: 'ghost', id: 'headmap-json', onclick: () => this.download('json') },
              'Download JSON',
            ),
            h(
              'button',
              { type: 'button', class: 'ghost', id: 'headmap-csv', onclick: () => this.download('csv') },
              'Download CSV',
            ),
          ),
        ),
      ),
    );
  }

  private wirePointer(): void {
    this.picture.addEventListener('mousemove', (e) => {
      if (this.pointer() === 'touch') return;
      this.hover(this.pointAt(e, HIT.mouse));
    });
    this.picture.addEventListener('mouseleave', () => {
      if (this.pointer() !== 'touch') this.hover(-1);
    });
    this.picture.addEventListener('click', (e) => {
      const touch = this.pointer() === 'touch';
      const i = this.pointAt(e, touch ? HIT.touch : HIT.mouse);
      if (i < 0) return;
      // Touch has no hover: the first tap shows the card, a second tap on the same head opens it.
      if (touch && this.hovered !== i) return this.hover(i);
      this.open(i);
    });
  }

  /** The map once per model (the server keeps it); colours and sizes follow every new context. */
  async update(ctx: ViewContext): Promise<void> {
    this.ctx = ctx;
    this.evidence.replaceChildren(...[evidenceNote(ctx.model, 'headmap-evidence')].filter((x) => x !== null));
    this.drawImportanceChoice(ctx);
    if (this.result) return this.draw();
    const gen = ++this.generation;
    this.status.className = 'status';
    this.status.textContent = `Measuring how alike the attention of all ${ctx.model.n_layer * ctx.model.n_head} heads is over a corpus… (a few seconds the first time; the server keeps the map)`;
    this.el.setAttribute('data-state', 'running');
    try {
      const r = await this.callbacks.headMap();
      if (gen !== this.generation) return;
      this.result = r;
      this.status.textContent = '';
      this.body.hidden = false;
      this.measure();
      this.draw();
      this.el.setAttribute('data-state', 'ready');
    } catch (e) {
      if (gen !== this.generation) return;
      this.body.hidden = true;
      this.status.className = 'status error';
      this.status.textContent =
        e instanceof ApiError
          ? `The server could not draw the head map: ${e.message}`
          : `Cannot reach the headscope server: ${(e as Error).message}`;
      this.el.setAttribute('data-state', 'error');
    }
  }

  /** "Size by importance": on once every head's effect on this text is measured; else why not. */
  private drawImportanceChoice(ctx: ViewContext): void {
    const measured = !!ctx.importance;
    this.sizeBox.disabled = !measured;
    this.sizeBox.checked = measured && this.sizeWanted;
    this.sizeReason.textContent = measured
      ? ''
      : ctx.importanceStatus === 'measuring'
        ? ' — importance is being measured on this text…'
        : ctx.importanceStatus
          ? ` — not available: ${ctx.importanceStatus}`
          : ' — not measured on this text yet: “Measure importance” in the selected head’s panel below takes each head out once and measures the change.';
  }

  private importanceShare(i: number): number | null {
    const imp = this.ctx?.importance;
    return imp && this.sizeBox.checked ? barFraction(imp, i) : null;
  }

  /** Picks the picture's size from the room it has; true when it changed. */
  private measure(): boolean {
    const room = Math.max(240, Math.min(MAX_WIDTH, Math.floor(this.plot.clientWidth || MAX_WIDTH)));
    const height = Math.round(room * (room < 520 ? 0.9 : 0.68));
    const changed = room !== this.size.width || height !== this.size.height;
    this.size = { width: room, height };
    return changed;
  }

  private draw(): void {
    const r = this.result,
      ctx = this.ctx;
    if (!r || !ctx) return;
    const { width, height } = this.size;
    this.scale = mapScale(r.heads, width, height, PAD + 2 * RADIUS);
    const s = this.scale;
    this.drawn = r.heads.map((p, i) => ({
      px: s.px(p.x),
      py: s.py(p.y),
      r: pointRadius(RADIUS, this.importanceShare(i)),
    }));
    Object.assign(this.picture.dataset, { k: String(s.k), n: String(r.heads.length) });
    this.picture.setAttribute('width', String(width));
    this.picture.setAttribute('height', String(height));
    this.picture.setAttribute('viewBox', `0 0 ${width} ${height}`);
    this.picture.replaceChildren(
      svg('rect', { x: 0.5, y: 0.5, width: width - 1, height: height - 1, fill: THEME.panel, stroke: THEME.border }),
      ...this.circles(),
    );
    this.summary.textContent = `Measured on ${r.source} (${r.texts} texts, ${r.rows.toLocaleString('en')} query rows): ${explainedText(r.explained)}. The places do not depend on your text; the colours and sizes do.`;
    this.drawLegend();
    this.drawCard();
  }

  /** One circle per head, the selected head ringed and drawn last (on top). */
  private circles(): SVGElement[] {
    const r = this.result!,
      ctx = this.ctx!;
    const selected = ctx.state.layer * r.n_head + ctx.state.head;
    const order = r.heads.map((_, i) => i).filter((i) => i !== selected && i !== this.hovered);
    for (const i of [this.hovered, selected]) if (i >= 0 && i < r.heads.length && !order.includes(i)) order.push(i);
    return order.map((i) => {
      const p = r.heads[i],
        d = this.drawn[i];
      const report = headReport(ctx, p.layer, p.head);
      const role = roleInfo(ctx.model, report.roles.primary.id);
      const ring = i === selected ? THEME.focus : i === this.hovered ? THEME.text : THEME.panel;
      return svg('circle', {
        class: 'headmap-point',
        cx: d.px.toFixed(2),
        cy: d.py.toFixed(2),
        r: d.r.toFixed(2),
        fill: role.color,
        stroke: ring,
        'stroke-width': i === selected || i === this.hovered ? 3 : 1,
        'data-index': i,
        'data-layer': p.layer,
        'data-head': p.head,
        'data-x': p.x,
        'data-y': p.y,
        'data-role': role.id,
        ...(i === selected ? { 'data-selected': 'true' } : {}),
      });
    });
  }

  private drawLegend(): void {
    const ctx = this.ctx!;
    const counts = new Map<string, number>();
    for (const rep of ctx.run.heads) counts.set(rep.roles.primary.id, (counts.get(rep.roles.primary.id) ?? 0) + 1);
    const items: HTMLElement[] = [];
    for (const role of ctx.model.roles) {
      const n = counts.get(role.id);
      if (!n) continue;
      items.push(
        h(
          'li',
          { title: role.description, 'data-role': role.id },
          h('span', { class: 'badge', style: roleStyle(role.color) }, roleBadge(role.name)),
          ` ${role.name}: ${n} head${n === 1 ? '' : 's'}`,
        ),
      );
    }
    this.legend.replaceChildren(...items);
  }

  private pointAt(e: MouseEvent, within: number): number {
    const box = this.picture.getBoundingClientRect();
    if (box.width === 0) return -1;
    const f = this.size.width / box.width;
    return nearestPoint(this.drawn, (e.clientX - box.left) * f, (e.clientY - box.top) * f, within * f);
  }

  private hover(i: number): void {
    if (i === this.hovered) return;
    this.hovered = i;
    this.picture.replaceChildren(this.picture.firstChild!, ...this.circles());
    this.drawCard();
  }

  private open(i: number): void {
    const p = this.result?.heads[i];
    if (p) this.callbacks.change({ layer: p.layer, head: p.head });
  }

  /** The card of the hovered head, or of the selected head when the pointer is elsewhere. */
  private drawCard(): void {
    const r = this.result,
      ctx = this.ctx;
    if (!r || !ctx) return;
    const selected = ctx.state.layer * r.n_head + ctx.state.head;
    const i = this.hovered >= 0 ? this.hovered : selected;
    const p = r.heads[i];
    if (!p) return this.card.replaceChildren();
    const report = headReport(ctx, p.layer, p.head);
    this.card.dataset.layer = String(p.layer);
    this.card.dataset.head = String(p.head);
    this.card.replaceChildren(...this.cardLines(i, report));
  }

  private cardLines(i: number, report: HeadReport): (HTMLElement | string)[] {
    const ctx = this.ctx!,
      p = this.result!.heads[i];
    const role = roleInfo(ctx.model, report.roles.primary.id);
    const groups = kvGroups(ctx.model);
    const kv = groups
      ? `${groups[p.kv_head].label} (shared K and V)`
      : `its own keys and values (KV ${p.kv_head + 1}: no grouped-query attention)`;
    const selected = i === ctx.state.layer * ctx.model.n_head + ctx.state.head;
    return [
      h('p', { class: 'kicker' }, this.hovered === i && !selected ? 'Under the pointer' : 'Selected head'),
      h('h3', { id: 'headmap-card-title' }, `${layerName(p.layer)} · ${headName(p.head)}`),
      h('p', { class: 'muted small' }, `index ${p.layer}.${p.head} · ${kv}`),
      h(
        'p',
        { id: 'headmap-card-role' },
        h('span', { class: 'badge', style: roleStyle(role.color) }, report.roles.primary.label),
        ' ',
        sentenceCase(report.roles.primary.evidence),
      ),
      ctx.importance ? h('p', { class: 'small' }, `${rankText(ctx.importance, i)} on this text`) : '',
      selected
        ? h('p', { class: 'muted small' }, 'Its heatmap and numbers are in the panel below.')
        : h(
            'button',
            { type: 'button', class: 'ghost', id: 'headmap-open', onclick: () => this.open(i) },
            'Open this head',
          ),
    ];
  }

  private download(format: 'json' | 'csv'): void {
    const r = this.result,
      ctx = this.ctx;
    if (!r || !ctx) return;
    const name = exportName([ctx.model.name, 'head-map'], format);
    if (format === 'json') download(headMapJson(r, ctx.model.name), name, 'application/json');
    else download(headMapCsv(r, ctx.model.name), name, 'text/csv');
  }

  exportParts(): (string | number)[] {
    return ['head-map'];
  }

  /** The picture as drawn: the points in their role colours and a line of what it is. */
  scene(): Scene | null {
    const r = this.result,
      ctx = this.ctx;
    if (!r || !ctx || this.drawn.length === 0) return null;
    const { width, height } = this.size;
    const top = 28;
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: 12,
        y: 18,
        text: `Head map of ${ctx.model.name}: ${explainedText(r.explained)} (corpus: ${r.source})`,
        size: 12,
        fill: THEME.text,
        weight: 'bold',
      },
      { kind: 'rect', x: 0.5, y: top + 0.5, w: width - 1, h: height - 1, fill: THEME.panel, stroke: THEME.border },
    ];
    r.heads.forEach((p, i) => {
      const d = this.drawn[i];
      const color = roleInfo(ctx.model, headReport(ctx, p.layer, p.head).roles.primary.id).color;
      items.push({
        kind: 'rect',
        x: d.px - d.r,
        y: top + d.py - d.r,
        w: 2 * d.r,
        h: 2 * d.r,
        rx: d.r,
        fill: color,
        stroke: THEME.panel,
        strokeWidth: 1,
      });
    });
    return { width, height: height + top + 8, background: THEME.panel, items };
  }
}
