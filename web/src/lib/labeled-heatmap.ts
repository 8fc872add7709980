// One attention matrix drawn large, with token labels on both axes when they fit, a highlight
// of the row and column under the pointer, and the exact value in a tooltip. Queries are rows
// (left labels), keys are columns (top labels): row q shows where query q looks.

import { THEME } from './theme';
import { canvasPoint, hideTooltip, pointerKind, showTooltip, sizeCanvas } from './dom';
import { cellAt, pixelsCanvas } from './heatmap';
import type { Matrix } from './matrix';
import type { Pixels, SceneItem } from './scene';
import { tokenLabel } from './format';

export interface LabeledHeatmapData {
  matrix: Matrix;
  pixels: Pixels;
  labels: string[];
  /** Tooltip lines for cell (q, k) of the shown matrix. */
  describe: (q: number, k: number, value: number) => string[];
}

/** Labels are drawn when every cell is at least this tall (px). */
const MIN_LABELLED_CELL = 9;
const LABEL_FONT = 11;

export class LabeledHeatmap {
  readonly el: HTMLCanvasElement;
  private data: LabeledHeatmapData | null = null;
  private source: HTMLCanvasElement | null = null;
  private hover: { q: number; k: number } | null = null;
  private layout = { label: 0, grid: 0, cell: 0 };

  constructor(
    private readonly maxGrid: number,
    private readonly onCell?: (q: number, k: number) => void,
  ) {
    this.el = document.createElement('canvas');
    this.el.className = 'labeled-heatmap';
    this.el.tabIndex = 0;
    const pointer = pointerKind(this.el);
    this.el.addEventListener('mousemove', (e) => {
      if (pointer() !== 'touch') this.onMove(e);
    });
    this.el.addEventListener('mouseleave', () => {
      if (pointer() === 'touch') return; // a tapped value stays until the next tap
      this.hover = null;
      hideTooltip();
      this.draw();
    });
    this.el.addEventListener('click', (e) => {
      const c = this.cellFromEvent(e);
      if (!c) return;
      // Touch: the first tap on a cell shows its value (as hovering does), a second tap acts.
      if (pointer() === 'touch' && (this.hover?.q !== c.q || this.hover?.k !== c.k)) return this.onMove(e);
      if (this.onCell) this.onCell(c.q, c.k);
    });
  }

  update(data: LabeledHeatmapData): void {
    this.data = data;
    this.source = pixelsCanvas(data.pixels);
    const n = data.matrix.n;
    const cell = Math.max(0.25, Math.min(28, this.maxGrid / Math.max(1, n)));
    const labelled = cell >= MIN_LABELLED_CELL;
    const longest = labelled ? Math.max(...data.labels.map((l) => tokenLabel(l).length), 1) : 0;
    const label = labelled ? Math.min(120, 12 + longest * 6.6) : 0;
    this.layout = { label, grid: cell * n, cell };
    this.el.setAttribute('aria-label', `attention heatmap, ${n} × ${n}`);
    this.draw();
  }

  get size(): { width: number; height: number } {
    return { width: this.layout.label + this.layout.grid + 2, height: this.layout.label + this.layout.grid + 2 };
  }

  private cellFromEvent(e: MouseEvent): { q: number; k: number } | null {
    if (!this.data) return null;
    const p = canvasPoint(this.el, e);
    return cellAt(p.x - this.layout.label, p.y - this.layout.label, this.layout.grid, this.data.matrix.n);
  }

  private onMove(e: MouseEvent): void {
    const c = this.cellFromEvent(e);
    if (!this.data || !c) {
      if (this.hover) {
        this.hover = null;
        hideTooltip();
        this.draw();
      }
      return;
    }
    this.hover = c;
    const v = this.data.matrix.data[c.q * this.data.matrix.n + c.k];
    showTooltip(e.clientX, e.clientY, this.data.describe(c.q, c.k, v));
    this.draw();
  }

  private draw(): void {
    if (!this.data || !this.source) return;
    const { width, height } = this.size;
    const ctx = sizeCanvas(this.el, width, height);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, width, height);
    const { label, grid, cell } = this.layout;
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.source, label, label, grid, grid);
    ctx.strokeStyle = THEME.border;
    ctx.lineWidth = 1;
    ctx.strokeRect(label - 0.5, label - 0.5, grid + 1, grid + 1);
    if (label > 0) this.drawLabels(ctx);
    if (this.hover) {
      ctx.strokeStyle = THEME.focus;
      ctx.lineWidth = 2;
      ctx.strokeRect(label + this.hover.k * cell, label + this.hover.q * cell, cell, cell);
    }
  }

  private drawLabels(ctx: CanvasRenderingContext2D): void {
    const { label, cell } = this.layout;
    const labels = this.data!.labels;
    ctx.textBaseline = 'middle';
    labels.forEach((raw, i) => {
      const text = tokenLabel(raw);
      const active = (this.hover?.q ?? -1) === i;
      ctx.font = `${active ? 'bold ' : ''}${LABEL_FONT}px system-ui, sans-serif`;
      ctx.fillStyle = active ? THEME.focus : THEME.text;
      ctx.textAlign = 'right';
      ctx.fillText(text, label - 5, label + (i + 0.5) * cell);
      const activeK = (this.hover?.k ?? -1) === i;
      ctx.save();
      ctx.translate(label + (i + 0.5) * cell, label - 5);
      ctx.rotate(-Math.PI / 2);
      ctx.font = `${activeK ? 'bold ' : ''}${LABEL_FONT}px system-ui, sans-serif`;
      ctx.fillStyle = activeK ? THEME.focus : THEME.text;
      ctx.textAlign = 'left';
      ctx.fillText(text, 0, 0);
      ctx.restore();
    });
  }

  /** The same picture as scene items, placed at (x, y). */
  sceneItems(x: number, y: number): SceneItem[] {
    if (!this.data) return [];
    const { label, grid, cell } = this.layout;
    const items: SceneItem[] = [
      { kind: 'image', x: x + label, y: y + label, w: grid, h: grid, pixels: this.data.pixels },
      {
        kind: 'rect',
        x: x + label - 0.5,
        y: y + label - 0.5,
        w: grid + 1,
        h: grid + 1,
        fill: 'none',
        stroke: THEME.border,
      },
    ];
    if (label > 0)
      this.data.labels.forEach((raw, i) => {
        const text = tokenLabel(raw);
        items.push({
          kind: 'text',
          x: x + label - 5,
          y: y + label + (i + 0.5) * cell + 4,
          text,
          size: LABEL_FONT,
          fill: THEME.text,
          anchor: 'end',
        });
        items.push({
          kind: 'text',
          x: x + label + (i + 0.5) * cell + 4,
          y: y + label - 5,
          text,
          size: LABEL_FONT,
          fill: THEME.text,
          rotate: -90,
        });
      });
    return items;
  }
}
