// A grid of patching effects as DOM cells: rows (layers, or heads at one position) × columns
// (heads, key/value heads or positions), each cell coloured by its normalised effect on the
// diverging scale (red below 0, white at 0, blue above), with its numbers in a tooltip and, where
// the view allows it, a click. Blocks (attention / feed-forward output, one per layer) are drawn as
// bars from a zero line instead. The same picture as scene items for the PNG/SVG export.

import { signedColour } from '../../lib/colour';
import { h, hideTooltip, pointerKind, showTooltip } from '../../lib/dom';
import { tokenLabel } from '../../lib/format';
import { signedPixels } from '../../lib/heatmap';
import type { SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import type { GridCell, GridColumn, GridRow, PatchGrid } from './patch-grid';

export interface EffectGridOptions {
  /** The grid element's id (the page's tests find it by id). */
  id: string;
  /** What the grid shows, for screen readers. */
  label: string;
  /** Tooltip lines of one cell (the first line is bold). */
  describe(row: GridRow, column: GridColumn, cell: GridCell | null): string[];
  /** Whether a cell acts on a click, and what it does. */
  clickable?(row: GridRow, column: GridColumn): boolean;
  onCell?(row: GridRow, column: GridColumn): void;
}

/** Scene sizes of the export: label widths and cell size. */
const SCENE_ROW_LABEL = 70;
const SCENE_COLUMN_LABEL = 64;
const SCENE_CELL = 18;

export class EffectGrid {
  readonly el: HTMLElement;
  private grid: PatchGrid | null = null;
  private limit = 1;
  private selected: { layer: number; head: number } | null = null;

  constructor(private readonly options: EffectGridOptions) {
    this.el = h('div', { class: 'effect-grid-wrap' });
  }

  /** Draws `grid` with ±limit at the ends of the colour scale; `selected` frames one head. */
  update(grid: PatchGrid, limit: number, selected: { layer: number; head: number } | null = null): void {
    this.grid = grid;
    this.limit = limit;
    this.selected = selected;
    this.el.replaceChildren(grid.kind === 'blocks' ? this.bars(grid) : this.cells(grid));
  }

  clear(): void {
    this.grid = null;
    this.el.replaceChildren();
  }

  private cells(grid: PatchGrid): HTMLElement {
    const o = this.options;
    const positions = grid.kind === 'positions' || grid.kind === 'head-positions';
    const el = h('div', {
      class: `effect-grid${positions ? ' by-position' : ''}`,
      id: o.id,
      role: 'grid',
      'aria-label': o.label,
      'data-rows': grid.rows.length,
      'data-columns': grid.columns.length,
      // The colour scale's half-width (two grids drawn side by side share it).
      'data-limit': this.limit,
      style: `grid-template-columns: max-content repeat(${grid.columns.length}, minmax(${positions ? 1.1 : 1.3}rem, ${grid.kind === 'kv' ? 5 : 2.4}rem))`,
    });
    el.appendChild(h('span', { class: 'corner' }));
    for (const c of grid.columns)
      el.appendChild(h('span', { class: 'column-label', title: c.label }, tokenLabel(c.label, positions ? 8 : 20)));
    const pointer = pointerKind(el);
    grid.rows.forEach((row, r) => {
      el.appendChild(h('span', { class: 'row-label' }, row.label));
      grid.columns.forEach((column, c) =>
        el.appendChild(this.cell(row, column, grid.cells[r * grid.columns.length + c], pointer)),
      );
    });
    return el;
  }

  private cell(row: GridRow, column: GridColumn, cell: GridCell | null, pointer: () => string): HTMLElement {
    const o = this.options;
    const n = cell?.normalised ?? null;
    const active = !!o.onCell && (o.clickable?.(row, column) ?? true);
    const head = row.head ?? column.head;
    const lines = () => o.describe(row, column, cell);
    const el = h('div', {
      class: `patch-cell${cell ? '' : ' empty'}${active ? ' active' : ''}`,
      role: 'gridcell',
      tabindex: active ? 0 : null,
      'data-layer': row.layer,
      'data-head': head ?? null,
      'data-position': column.position ?? null,
      'data-normalised': n ?? null,
      'data-value': cell?.value ?? null,
      'aria-label': lines().join('; '),
      style: cell ? `background: ${signedColour(n ?? 0, this.limit)}` : null,
    });
    if (this.selected && this.selected.layer === row.layer && this.selected.head === head) el.classList.add('selected');
    const show = (e: MouseEvent) => showTooltip(e.clientX, e.clientY, lines());
    el.addEventListener('mousemove', (e) => {
      if (pointer() !== 'touch') show(e);
    });
    el.addEventListener('mouseleave', () => {
      if (pointer() !== 'touch') hideTooltip();
    });
    if (active) {
      // Touch: the first tap shows the numbers (as hovering does), a second tap acts.
      let shown = false;
      el.addEventListener('click', (e) => {
        if (pointer() === 'touch' && !shown) {
          shown = true;
          return show(e);
        }
        hideTooltip();
        o.onCell!(row, column);
      });
      el.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          o.onCell!(row, column);
        }
      });
    }
    return el;
  }

  private bars(grid: PatchGrid): HTMLElement {
    const el = h('div', { class: 'effect-bars', id: this.options.id, role: 'list', 'aria-label': this.options.label });
    grid.rows.forEach((row, r) => {
      const cell = grid.cells[r];
      const n = cell?.normalised ?? null;
      const share = n === null ? 0 : Math.min(1, Math.abs(n) / this.limit) * 50;
      const bar = h('span', {
        class: 'bar',
        style: `width: ${share}%; ${n !== null && n < 0 ? `right: 50%` : 'left: 50%'}; background: ${signedColour(n ?? 0, this.limit)}`,
      });
      const lines = this.options.describe(row, grid.columns[0], cell);
      el.appendChild(
        h(
          'div',
          {
            class: `patch-bar${cell ? '' : ' empty'}`,
            role: 'listitem',
            'data-layer': row.layer,
            'data-normalised': n ?? null,
            'data-value': cell?.value ?? null,
            'aria-label': lines.join('; '),
            title: lines.join('\n'),
          },
          h('span', { class: 'row-label' }, row.label),
          h('span', { class: 'track' }, h('span', { class: 'zero' }), bar),
          h('span', { class: 'bar-value' }, n === null ? (cell ? '–' : 'not patched') : n.toFixed(3)),
        ),
      );
    });
    return el;
  }

  /** The grid as scene items at (x, y) and the height they take. */
  sceneItems(x: number, y: number): { items: SceneItem[]; width: number; height: number } {
    const g = this.grid;
    if (!g) return { items: [], width: 0, height: 0 };
    const cols = g.columns.length,
      rows = g.rows.length;
    const values = g.cells.map((c) => c?.normalised ?? 0);
    const gx = x + SCENE_ROW_LABEL,
      gy = y + SCENE_COLUMN_LABEL;
    const items: SceneItem[] = [
      {
        kind: 'image',
        x: gx,
        y: gy,
        w: cols * SCENE_CELL,
        h: rows * SCENE_CELL,
        pixels: signedPixels(values, cols, rows, this.limit),
      },
      {
        kind: 'rect',
        x: gx - 0.5,
        y: gy - 0.5,
        w: cols * SCENE_CELL + 1,
        h: rows * SCENE_CELL + 1,
        fill: 'none',
        stroke: THEME.border,
      },
    ];
    g.rows.forEach((row, r) =>
      items.push({
        kind: 'text',
        x: gx - 4,
        y: gy + (r + 0.5) * SCENE_CELL + 4,
        text: row.label,
        size: 10,
        fill: THEME.text,
        anchor: 'end',
      }),
    );
    g.columns.forEach((c, i) =>
      items.push({
        kind: 'text',
        x: gx + (i + 0.5) * SCENE_CELL + 4,
        y: gy - 4,
        text: tokenLabel(c.label, 10),
        size: 10,
        fill: THEME.text,
        rotate: -90,
      }),
    );
    return { items, width: SCENE_ROW_LABEL + cols * SCENE_CELL, height: SCENE_COLUMN_LABEL + rows * SCENE_CELL };
  }
}
