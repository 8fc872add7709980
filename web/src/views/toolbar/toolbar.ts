// The controls shared by every view: which view, which layer and head, tokens or words, special
// tokens shown or hidden, the colour scale, and the exports.

import { h } from '../../lib/dom';
import { SCALES, type ScaleName } from '../../lib/colour';
import type { Level, ViewState } from '../../lib/state';
import type { ViewDefinition } from '../context';
import { headWithIndex, layerWithIndex, NUMBERING_NOTE } from '../../lib/numbering';
import { MAP_EXPLANATION, MAP_LABELS, MAP_VIEWS, mapsReasonText, type MapAvailability } from '../../lib/maps';

/** Above this many layers the buttons give way to a select (a 30-layer model's 30 buttons do not
 *  fit a toolbar); on narrow screens the select is used whatever the count (styles.css). */
export const MAX_LAYER_BUTTONS = 16;

export interface ToolbarCallbacks {
  change(patch: Partial<ViewState>): void;
  /** A tab was chosen: open that view and scroll to it. */
  openView(view: string): void;
  exportView(format: 'png' | 'svg'): void;
  exportStats(format: 'csv' | 'json'): void;
}

const SCALE_LABELS: Record<ScaleName, string> = { linear: 'Linear', log: 'Log', contrast: 'Contrast (√)' };

export class Toolbar {
  readonly el: HTMLElement;
  private tabs: HTMLElement;
  private layers: HTMLElement;
  private layerSelect: HTMLSelectElement;
  private head: HTMLSelectElement;
  private level: HTMLElement;
  private special: HTMLInputElement;
  private scale: HTMLSelectElement;
  private maps: HTMLElement;
  private mapsNote: HTMLElement;

  /** views: one tab each, in this order (views/index.ts). */
  constructor(
    callbacks: ToolbarCallbacks,
    views: readonly Pick<ViewDefinition, 'id' | 'label'>[],
    nLayer: number,
    nHead: number,
  ) {
    this.tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'views' });
    views.forEach((v, i) => {
      this.tabs.appendChild(
        h(
          'button',
          {
            class: 'tab',
            role: 'tab',
            type: 'button',
            'data-view': v.id,
            title: `${v.label} (key ${i + 1})`,
            onclick: () => callbacks.openView(v.id),
          },
          v.label,
        ),
      );
    });
    this.layers = h('div', { class: 'segmented', role: 'group', 'aria-label': 'layer' });
    for (let l = 0; l < nLayer; l++)
      this.layers.appendChild(
        h(
          'button',
          {
            type: 'button',
            'data-layer': l,
            title: `${layerWithIndex(l)} (↑/↓)`,
            onclick: () => callbacks.change({ layer: l }),
          },
          String(l + 1),
        ),
      );
    this.layerSelect = h('select', { id: 'layer-select', 'aria-label': 'layer' });
    for (let l = 0; l < nLayer; l++) this.layerSelect.appendChild(h('option', { value: l }, layerWithIndex(l)));
    this.layerSelect.addEventListener('change', () => callbacks.change({ layer: Number(this.layerSelect.value) }));
    this.head = h('select', { id: 'head-select', 'aria-label': 'head' });
    for (let hh = 0; hh < nHead; hh++) this.head.appendChild(h('option', { value: hh }, headWithIndex(hh)));
    this.head.addEventListener('change', () => callbacks.change({ head: Number(this.head.value) }));
    this.level = h('div', { class: 'segmented', role: 'group', 'aria-label': 'units' });
    (['token', 'word'] as Level[]).forEach((lv) =>
      this.level.appendChild(
        h(
          'button',
          {
            type: 'button',
            'data-level': lv,
            title: 'tokens or whole words (key w)',
            onclick: () => callbacks.change({ level: lv }),
          },
          lv === 'token' ? 'Tokens' : 'Words',
        ),
      ),
    );
    this.special = h('input', { type: 'checkbox', id: 'hide-special' });
    this.special.addEventListener('change', () => callbacks.change({ hideSpecial: this.special.checked }));
    this.scale = h('select', { id: 'scale-select', 'aria-label': 'colour scale' });
    for (const s of SCALES) this.scale.appendChild(h('option', { value: s }, SCALE_LABELS[s]));
    this.scale.addEventListener('change', () => callbacks.change({ scale: this.scale.value as ScaleName }));

    // What the maps show (lib/maps.ts): the layer grid, the model overview and the head panel follow it.
    this.maps = h('div', { class: 'segmented', role: 'group', 'aria-label': 'maps', id: 'maps-toggle' });
    for (const m of MAP_VIEWS)
      this.maps.appendChild(
        h(
          'button',
          {
            type: 'button',
            'data-maps': m,
            title: `${MAP_EXPLANATION[m]} (key n)`,
            onclick: () => callbacks.change({ maps: m }),
          },
          MAP_LABELS[m],
        ),
      );
    this.mapsNote = h('p', { class: 'maps-note muted small', id: 'maps-note', 'aria-live': 'polite', hidden: true });

    const exportButton = (label: string, id: string, fn: () => void, title: string) =>
      h('button', { type: 'button', class: 'ghost', id, title, onclick: fn }, label);
    this.el = h(
      'nav',
      {
        class: 'toolbar' + (nLayer > MAX_LAYER_BUTTONS ? ' many-layers' : ''),
        id: 'toolbar',
        'aria-label': 'view controls',
      },
      this.tabs,
      h(
        'div',
        { class: 'controls' },
        h(
          'div',
          { class: 'control layer-control', role: 'group', 'aria-label': 'layer' },
          h('span', { title: NUMBERING_NOTE }, 'Layer'),
          this.layers,
          this.layerSelect,
        ),
        h('label', { class: 'control' }, h('span', { title: NUMBERING_NOTE }, 'Head'), this.head),
        h('label', { class: 'control' }, h('span', {}, 'Units'), this.level),
        h('label', { class: 'control check', for: 'hide-special' }, this.special, h('span', {}, 'Hide special tokens')),
        h('label', { class: 'control' }, h('span', {}, 'Colour'), this.scale),
        h(
          'div',
          { class: 'control maps-control', role: 'group', 'aria-label': 'maps' },
          h('span', { title: 'what the layer grid, the model overview and the head panel draw' }, 'Maps'),
          this.maps,
        ),
        h(
          'div',
          { class: 'control exports', role: 'group', 'aria-label': 'export' },
          h('span', {}, 'Export'),
          exportButton('PNG', 'export-png', () => callbacks.exportView('png'), 'the current view as a PNG image'),
          exportButton('SVG', 'export-svg', () => callbacks.exportView('svg'), 'the current view as an SVG drawing'),
          exportButton('CSV', 'export-csv', () => callbacks.exportStats('csv'), 'statistics of every head as CSV'),
          exportButton(
            'JSON',
            'export-json',
            () => callbacks.exportStats('json'),
            'statistics and roles of every head as JSON',
          ),
        ),
      ),
      this.mapsNote,
    );
  }

  /** views: which map views the current run can show (/api/run "views"); unknown before a run. */
  update(state: ViewState, views?: MapAvailability): void {
    const notes: string[] = [];
    for (const b of this.maps.querySelectorAll<HTMLButtonElement>('button')) {
      const m = b.getAttribute('data-maps') as keyof typeof MAP_LABELS;
      const raw = views?.[m] ?? null;
      const reason = raw === null ? null : mapsReasonText(m, raw);
      b.setAttribute('aria-pressed', String(m === state.maps));
      b.disabled = reason !== null;
      b.title = reason ? `${MAP_LABELS[m]} is not available: ${reason}.` : `${MAP_EXPLANATION[m]} (key n)`;
      if (reason) notes.push(`${reason}${m === state.maps ? ' (the weights are shown instead)' : ''}.`);
    }
    if (state.maps !== 'weights' && !views?.[state.maps]) notes.unshift(MAP_EXPLANATION[state.maps]);
    this.mapsNote.hidden = notes.length === 0;
    this.mapsNote.textContent = notes.join(' ');
    for (const tab of this.tabs.children) {
      const on = tab.getAttribute('data-view') === state.view;
      tab.setAttribute('aria-selected', String(on));
      tab.classList.toggle('active', on);
    }
    for (const b of this.layers.children)
      b.setAttribute('aria-pressed', String(Number(b.getAttribute('data-layer')) === state.layer));
    for (const b of this.level.children)
      b.setAttribute('aria-pressed', String(b.getAttribute('data-level') === state.level));
    this.layerSelect.value = String(state.layer);
    this.head.value = String(state.head);
    this.special.checked = state.hideSpecial;
    this.scale.value = state.scale;
  }
}
