// One head as lines from each token (left, the query) to the tokens it attends to (right, the
// keys); line strength follows the weight on the chosen colour scale. Hover a token to see only
// its lines and their exact weights; click it to keep that view (click again or Esc to release).

import { scaleValue } from '../../lib/colour';
import { canvasPoint, h, hideTooltip, pointerKind, showTooltip, sizeCanvas } from '../../lib/dom';
import { tokenLabel } from '../../lib/format';
import { headMatrix } from '../../lib/matrix';
import { shownMatrix, type ShownMatrix } from '../../lib/display';
import { drawScene, type Scene, type SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import type { Tensor } from '../../lib/wire';
import { pixelsCanvas } from '../../lib/heatmap';
import { headReport, type ExportableView, type ViewContext } from '../context';
import { headName, layerName } from '../../lib/numbering';

const ROW = 20;
const TOP = 28;
const COL_W = 130;
const GAP_W = 260;
const VALUE_W = 48;
/** Right edge of the query labels and left edge of the key labels. */
const QX = VALUE_W + COL_W;
const KX = QX + GAP_W;
/** Lines fainter than this (after the colour scale) are not drawn when no token is in focus. */
const MIN_VISIBLE = 0.05;

export interface LinesCallbacks {
  lock(unit: number): void;
}

type Focus = { side: 'query' | 'key'; index: number } | null;

export class LinesView implements ExportableView {
  readonly el: HTMLElement;
  private canvas: HTMLCanvasElement;
  private heading: HTMLElement;
  private note: HTMLElement;
  private ctx: ViewContext | null = null;
  private shown: ShownMatrix | null = null;
  private hover: Focus = null;

  constructor(private readonly callbacks: LinesCallbacks) {
    this.heading = h('h2', { id: 'lines-title' });
    this.note = h('p', { class: 'muted', id: 'lines-note', 'aria-live': 'polite' });
    this.canvas = h('canvas', {
      class: 'lines-canvas',
      id: 'lines-canvas',
      tabindex: 0,
      'aria-label': 'attention lines of the selected head',
    });
    const pointer = pointerKind(this.canvas);
    this.canvas.addEventListener('mousemove', (e) => {
      if (pointer() !== 'touch') this.onMove(e);
    });
    this.canvas.addEventListener('mouseleave', () => {
      if (pointer() === 'touch') return; // a tapped value stays until the next tap
      this.hover = null;
      hideTooltip();
      this.draw();
    });
    this.canvas.addEventListener('click', (e) => {
      const p = canvasPoint(this.canvas, e);
      const f = this.focusAt(p.x, p.y);
      // Touch: a first tap shows a token's lines and weights (as hovering does); a second tap on
      // the same query token locks it.
      if (pointer() === 'touch' && JSON.stringify(f) !== JSON.stringify(this.hover)) return this.onMove(e);
      if (!f || f.side !== 'query' || !this.shown || !this.ctx) return;
      const unit = this.shown.index[f.index];
      this.callbacks.lock(this.ctx.state.lock === unit ? -1 : unit);
    });
    this.el = h(
      'section',
      { class: 'view lines-view', 'aria-labelledby': 'lines-title' },
      h('div', { class: 'view-head' }, this.heading),
      this.note,
      h('div', { class: 'scroll-y' }, this.canvas),
    );
  }

  /** attention: [1, n_head, U, U] of the selected layer. */
  update(ctx: ViewContext, attention: Tensor): void {
    this.ctx = ctx;
    const { state, units } = ctx;
    this.shown = shownMatrix(headMatrix(attention, 0, state.head), units, state.hideSpecial);
    const role = headReport(ctx, state.layer, state.head).roles.primary;
    this.heading.textContent = `${layerName(state.layer)} · ${headName(state.head)} – ${role.name}: who looks at whom`;
    this.draw();
  }

  private lockedIndex(): number {
    if (!this.ctx || !this.shown || this.ctx.state.lock < 0) return -1;
    return this.shown.index.indexOf(this.ctx.state.lock);
  }

  /** The shown rows that hold a generated token (Generate), marked ✦. */
  private generatedUnits(): Set<number> {
    const out = new Set<number>();
    const ctx = this.ctx;
    if (!ctx?.generated?.length || !this.shown) return out;
    const positions = new Set(ctx.generated);
    this.shown.index.forEach((unit, i) => {
      if (ctx.units.tokens[unit]?.some((t) => positions.has(t))) out.add(i);
    });
    return out;
  }

  private focus(): Focus {
    const locked = this.lockedIndex();
    return locked >= 0 ? { side: 'query', index: locked } : this.hover;
  }

  private focusAt(x: number, y: number): Focus {
    if (!this.shown) return null;
    const i = Math.floor((y - TOP) / ROW);
    if (i < 0 || i >= this.shown.matrix.n) return null;
    if (x <= QX + 8) return { side: 'query', index: i };
    if (x >= KX - 8) return { side: 'key', index: i };
    return null;
  }

  private onMove(e: MouseEvent): void {
    const p = canvasPoint(this.canvas, e);
    const f = this.focusAt(p.x, p.y);
    const changed = JSON.stringify(f) !== JSON.stringify(this.hover);
    this.hover = f;
    if (f && this.shown) {
      const { matrix, labels } = this.shown;
      const n = matrix.n;
      const weights = Array.from({ length: n }, (_, j) =>
        f.side === 'query' ? matrix.data[f.index * n + j] : matrix.data[j * n + f.index],
      );
      const order = weights
        .map((w, j) => [w, j] as const)
        .sort((a, b) => b[0] - a[0])
        .slice(0, 4);
      showTooltip(e.clientX, e.clientY, [
        f.side === 'query'
          ? `“${tokenLabel(labels[f.index], 20)}” attends to`
          : `attending to “${tokenLabel(labels[f.index], 20)}”`,
        ...order.map(([w, j]) => `${tokenLabel(labels[j], 20)}: ${w.toFixed(4)}`),
      ]);
    } else hideTooltip();
    if (changed) this.draw();
  }

  private draw(): void {
    if (!this.shown) return;
    const scene = this.scene();
    if (!scene) return;
    drawScene(sizeCanvas(this.canvas, scene.width, scene.height), scene, pixelsCanvas);
    const locked = this.lockedIndex();
    const generated = this.generatedUnits().size;
    this.canvas.dataset.generated = String(generated);
    this.note.textContent =
      (locked >= 0
        ? `Locked on “${this.shown.labels[locked]}”: click it again or press Esc to release.`
        : 'Hover (or tap) a token on the left to see where it looks, on the right to see who looks at it; click a left token (or tap it again) to lock it.') +
      (generated > 0 ? ` ✦ marks the ${generated} generated ${generated === 1 ? 'token' : 'tokens'}.` : '');
  }

  exportParts(): (string | number)[] {
    return this.ctx ? [`layer${this.ctx.state.layer + 1}`, `head${this.ctx.state.head + 1}`, 'lines'] : ['lines'];
  }

  scene(): Scene | null {
    if (!this.ctx || !this.shown) return null;
    const { matrix, labels } = this.shown;
    const n = matrix.n;
    const scale = this.ctx.state.scale;
    const focus = this.focus();
    const items: SceneItem[] = [
      { kind: 'text', x: QX, y: 16, text: 'query (looks)', size: 11, fill: THEME.muted, anchor: 'end' },
      { kind: 'text', x: KX, y: 16, text: 'key (looked at)', size: 11, fill: THEME.muted },
    ];
    const y = (i: number) => TOP + i * ROW + ROW / 2;
    for (let q = 0; q < n; q++)
      for (let k = 0; k < n; k++) {
        const inFocus = !focus || (focus.side === 'query' ? focus.index === q : focus.index === k);
        if (!inFocus) continue;
        const strength = scaleValue(matrix.data[q * n + k], scale);
        if (strength < (focus ? 0.01 : MIN_VISIBLE)) continue;
        items.push({
          kind: 'line',
          x1: QX + 6,
          y1: y(q),
          x2: KX - 6,
          y2: y(k),
          stroke: THEME.accent,
          width: focus ? 3 : 2,
          opacity: Math.min(1, strength),
        });
      }
    const generated = this.generatedUnits();
    for (let i = 0; i < n; i++) {
      const qActive = focus?.side === 'query' && focus.index === i;
      const mark = generated.has(i) ? '✦ ' : '';
      const plain = generated.has(i) ? THEME.accent : THEME.text;
      const kActive = focus?.side === 'key' && focus.index === i;
      items.push({
        kind: 'text',
        x: QX,
        y: y(i) + 4,
        text: mark + tokenLabel(labels[i], 18),
        size: 12,
        fill: qActive ? THEME.focus : plain,
        anchor: 'end',
        weight: qActive ? 'bold' : 'normal',
      });
      items.push({
        kind: 'text',
        x: KX,
        y: y(i) + 4,
        text: mark + tokenLabel(labels[i], 18),
        size: 12,
        fill: kActive ? THEME.focus : plain,
        weight: kActive ? 'bold' : 'normal',
      });
      if (focus) {
        const w = focus.side === 'query' ? matrix.data[focus.index * n + i] : matrix.data[i * n + focus.index];
        const x = focus.side === 'query' ? KX + COL_W + VALUE_W - 4 : 4;
        items.push({
          kind: 'text',
          x,
          y: y(i) + 4,
          text: w.toFixed(3),
          size: 11,
          fill: THEME.muted,
          mono: true,
          anchor: focus.side === 'query' ? 'end' : 'start',
        });
      }
    }
    return { width: KX + COL_W + VALUE_W, height: TOP + n * ROW + 8, background: THEME.panel, items };
  }
}
