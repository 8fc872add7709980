// Two heads side by side and their difference A − B (blue where A attends more, red where B
// does), with the mean total-variation distance between their rows as one number.

import { h, clear } from '../../lib/dom';
import { fixed, tokenLabel } from '../../lib/format';
import { displayPixels, signedPixels } from '../../lib/heatmap';
import { LabeledHeatmap } from '../../lib/labeled-heatmap';
import { attentionLegend, attentionLegendItems, signedLegend, signedLegendItems } from '../../lib/legend';
import { difference, headMatrix, maxAbs, type Matrix } from '../../lib/matrix';
import { layerWindow, shownMask, shownMatrix } from '../../lib/display';
import type { Scene, SceneItem } from '../../lib/scene';
import type { HeadRef, ViewState } from '../../lib/state';
import { THEME } from '../../lib/theme';
import type { Tensor } from '../../lib/wire';
import { headReport, type ExportableView, type ViewContext } from '../context';
import { headName, layerName } from '../../lib/numbering';

/** Largest side of each of the three heatmaps, in CSS pixels. */
const COMPARE_SIZE = 250;

export interface CompareCallbacks {
  change(patch: Partial<ViewState>): void;
}

/** Mean over rows of ½ Σ_k |a_qk − b_qk|: 0 for identical heads, 1 for disjoint ones. */
export function meanRowDistance(a: Matrix, b: Matrix): number {
  if (a.n === 0) return 0;
  let total = 0;
  for (let q = 0; q < a.n; q++) {
    let d = 0;
    for (let k = 0; k < a.n; k++) d += Math.abs(a.data[q * a.n + k] - b.data[q * a.n + k]);
    total += d / 2;
  }
  return total / a.n;
}

export class CompareView implements ExportableView {
  readonly el: HTMLElement;
  private pickers: HTMLElement;
  private maps: LabeledHeatmap[] = [
    new LabeledHeatmap(COMPARE_SIZE),
    new LabeledHeatmap(COMPARE_SIZE),
    new LabeledHeatmap(COMPARE_SIZE),
  ];
  private captions: HTMLElement[] = [h('figcaption'), h('figcaption'), h('figcaption')];
  private legends: HTMLElement[] = [h('div'), h('div'), h('div')];
  private summary: HTMLElement;
  private ctx: ViewContext | null = null;
  private limit = 1;
  private distance = 0;

  constructor(private readonly callbacks: CompareCallbacks) {
    this.pickers = h('div', { class: 'pickers' });
    this.summary = h('p', { class: 'compare-summary', id: 'compare-summary' });
    this.el = h(
      'section',
      { class: 'view compare-view', 'aria-labelledby': 'compare-title' },
      h('div', { class: 'view-head' }, h('h2', { id: 'compare-title' }, 'Two heads side by side')),
      this.pickers,
      this.summary,
      h(
        'div',
        { class: 'compare-row' },
        ...this.maps.map((m, i) =>
          h(
            'figure',
            { class: 'compare-fig', 'data-panel': ['a', 'b', 'diff'][i] },
            this.captions[i],
            m.el,
            this.legends[i],
          ),
        ),
      ),
    );
  }

  private picker(
    name: 'A' | 'B',
    ref: HeadRef,
    nLayer: number,
    nHead: number,
    key: 'compareA' | 'compareB',
  ): HTMLElement {
    const layer = h('select', { 'aria-label': `head ${name}: layer`, id: `compare-${name.toLowerCase()}-layer` });
    for (let l = 0; l < nLayer; l++)
      layer.appendChild(h('option', { value: l, selected: l === ref.layer }, layerName(l)));
    const head = h('select', { 'aria-label': `head ${name}: head`, id: `compare-${name.toLowerCase()}-head` });
    for (let hh = 0; hh < nHead; hh++)
      head.appendChild(h('option', { value: hh, selected: hh === ref.head }, headName(hh)));
    const onChange = () => this.callbacks.change({ [key]: { layer: Number(layer.value), head: Number(head.value) } });
    layer.addEventListener('change', onChange);
    head.addEventListener('change', onChange);
    return h('div', { class: 'picker' }, h('strong', {}, name), layer, head);
  }

  /** layerA, layerB: [1, n_head, U, U] attention of the layers of heads A and B. */
  update(ctx: ViewContext, layerA: Tensor, layerB: Tensor): void {
    this.ctx = ctx;
    const { model, state, units } = ctx;
    const { compareA: a, compareB: b } = state;
    clear(this.pickers);
    this.pickers.append(
      this.picker('A', a, model.n_layer, model.n_head, 'compareA'),
      this.picker('B', b, model.n_layer, model.n_head, 'compareB'),
      h(
        'button',
        {
          type: 'button',
          class: 'ghost',
          id: 'compare-swap',
          onclick: () => this.callbacks.change({ compareA: b, compareB: a }),
        },
        'Swap',
      ),
      h(
        'button',
        {
          type: 'button',
          class: 'ghost',
          id: 'compare-use-selected',
          onclick: () => this.callbacks.change({ compareA: { layer: state.layer, head: state.head } }),
        },
        'A = selected head',
      ),
    );
    const sa = shownMatrix(headMatrix(layerA, 0, a.head), units, state.hideSpecial);
    const sb = shownMatrix(headMatrix(layerB, 0, b.head), units, state.hideSpecial);
    const diff = difference(sa.matrix, sb.matrix);
    this.limit = Math.max(0.05, maxAbs(diff.data));
    this.distance = meanRowDistance(sa.matrix, sb.matrix);
    const describe = (m: Matrix, what: string) => (q: number, k: number, v: number) =>
      [
        `${tokenLabel(sa.labels[q], 24)} → ${tokenLabel(sa.labels[k], 24)}`,
        `${what}: ${v >= 0 && what.includes('−') ? '+' : ''}${v.toFixed(4)}`,
        what.includes('−')
          ? `A ${sa.matrix.data[q * m.n + k].toFixed(4)}, B ${sb.matrix.data[q * m.n + k].toFixed(4)}`
          : '',
      ].filter(Boolean);
    const wa = layerWindow(model, a.layer, ctx.run.n_tokens),
      wb = layerWindow(model, b.layer, ctx.run.n_tokens);
    const ma = shownMask(sa, units, model.causal, wa),
      mb = shownMask(sb, units, model.causal, wb);
    this.maps[0].update({
      matrix: sa.matrix,
      pixels: displayPixels(sa.matrix, state.scale, COMPARE_SIZE, ma ?? false),
      labels: sa.labels,
      describe: describe(sa.matrix, 'A'),
    });
    this.maps[1].update({
      matrix: sb.matrix,
      pixels: displayPixels(sb.matrix, state.scale, COMPARE_SIZE, mb ?? false),
      labels: sb.labels,
      describe: describe(sb.matrix, 'B'),
    });
    this.maps[2].update({
      matrix: diff,
      pixels: signedPixels(diff.data, diff.n, diff.n, this.limit),
      labels: sa.labels,
      describe: describe(diff, 'A − B'),
    });
    const ra = headReport(ctx, a.layer, a.head).roles.primary,
      rb = headReport(ctx, b.layer, b.head).roles.primary;
    this.captions[0].textContent = `A: ${layerName(a.layer)}, ${headName(a.head)} – ${ra.name}`;
    this.captions[1].textContent = `B: ${layerName(b.layer)}, ${headName(b.head)} – ${rb.name}`;
    this.captions[2].textContent = 'A − B';
    clear(this.legends[0]);
    this.legends[0].appendChild(attentionLegend(state.scale, model.causal, 'weights', wa));
    clear(this.legends[1]);
    this.legends[1].appendChild(attentionLegend(state.scale, model.causal, 'weights', wb));
    clear(this.legends[2]);
    this.legends[2].appendChild(signedLegend(this.limit, 'difference (blue: A more, red: B more)'));
    this.summary.textContent = `Mean distance between their rows: ${fixed(this.distance, 3)} (0 = the two heads attend identically, 1 = never to the same ${units.level}s).`;
  }

  exportParts(): (string | number)[] {
    if (!this.ctx) return ['compare'];
    const { compareA: a, compareB: b } = this.ctx.state;
    return ['compare', `layer${a.layer + 1}-head${a.head + 1}`, 'vs', `layer${b.layer + 1}-head${b.head + 1}`];
  }

  scene(): Scene | null {
    if (!this.ctx) return null;
    const pad = 16,
      gap = 24,
      top = 54;
    const sizes = this.maps.map((m) => m.size);
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: pad,
        y: 24,
        text: `${this.ctx.model.name}: two heads and their difference`,
        size: 15,
        fill: THEME.text,
        weight: 'bold',
      },
      { kind: 'text', x: pad, y: 42, text: this.summary.textContent ?? '', size: 11, fill: THEME.muted },
    ];
    let x = pad;
    const maxH = Math.max(...sizes.map((s) => s.height));
    this.maps.forEach((m, i) => {
      items.push({
        kind: 'text',
        x,
        y: top + 12,
        text: this.captions[i].textContent ?? '',
        size: 12,
        fill: THEME.text,
        weight: 'bold',
      });
      items.push(...m.sceneItems(x, top + 18));
      const ly = top + 24 + maxH;
      const lw = Math.min(220, sizes[i].width);
      items.push(
        ...(i < 2
          ? attentionLegendItems(x, ly, lw, this.ctx!.state.scale, THEME.text, this.ctx!.model.causal)
          : signedLegendItems(x, ly, lw, this.limit, 'A − B', THEME.text)),
      );
      x += sizes[i].width + gap;
    });
    return { width: x, height: top + maxH + 80, background: THEME.panel, items };
  }
}
