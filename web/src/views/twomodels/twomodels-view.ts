// "Compare models": the text of the page analysed by two models of one server (serve --model A
// --model B), side by side. For each model its tokens and every head as one small cell coloured by
// its primary role, the two grids of one height so that layers line up by relative depth; under
// them the census of roles of both, and "which heads link A → B?" asked of both models, the
// tokens matched by the characters they cover.

import { ApiError, type HeadReport, type LinkResult, type ModelInfo, type RunResult } from '../../lib/api';
import { append, clear, h } from '../../lib/dom';
import { fixed, percent, tokenLabel } from '../../lib/format';
import { headTag, headWithIndex, layerName, layerWithIndex } from '../../lib/numbering';
import { linksText } from '../../lib/tokens';
import { tokenShown } from '../../lib/units';
import { roleInfo, type ViewContext } from '../context';
import { censusRows, roleCensus, tokenCovering, type CensusEntry } from './align';
import { download, exportName } from '../../lib/export';
import type { Scene } from '../../lib/scene';
import { twoModelsCsv, twoModelsScene, type LinkAnswer } from './twomodels-export';

/** What the view asks of the page: the served models, a run and a link on model `index`, and
 *  opening a head of the page's own model (index 0) in the other views. */
export interface TwoModelsHost {
  readonly models: readonly ModelInfo[];
  run(index: number, text: string): Promise<RunResult>;
  link(index: number, text: string, q: number, k: number): Promise<LinkResult>;
  open(layer: number, head: number): void;
}

/** Tokens listed above a grid; a long text says how many more there are. */
const MAX_TOKENS_SHOWN = 240;

/** What one side holds: its model's index and its run, or why it has none yet. */
interface Side {
  index: number;
  el: HTMLElement;
  status: HTMLElement;
  tokens: HTMLElement;
  grid: HTMLElement;
  card: HTMLElement;
  run: RunResult | null;
}

/** Replaces `el`'s children, leaving out the absent ones. */
function refill(el: HTMLElement, ...children: (Node | string | null)[]): void {
  el.replaceChildren();
  append(el, ...children);
}

export class TwoModelsView {
  readonly el: HTMLElement;
  private intro: HTMLElement;
  private single: HTMLElement;
  private choose: HTMLElement;
  private sidesEl: HTMLElement;
  private census: HTMLElement;
  private linkBox: HTMLElement;
  private sides: Side[] = [];
  private pair: [number, number] = [0, 1];
  /** The text and pair drawn, so that a change of head elsewhere does not run both models again. */
  private drawnKey = '';
  private generation = 0;
  private text = '';
  /** The last answers to "which heads link A → B?", per side (for the exports); null: not asked. */
  private links: (LinkAnswer | null)[] | null = null;
  private csvButton: HTMLButtonElement;

  constructor(private readonly host: TwoModelsHost) {
    this.intro = h('p', { class: 'muted', id: 'tm-intro' });
    this.single = h('div', { class: 'tm-single', id: 'tm-single', hidden: true });
    this.choose = h('p', { class: 'tm-choose', id: 'tm-choose', hidden: true });
    this.sidesEl = h('div', { class: 'tm-sides', id: 'tm-sides' });
    this.census = h('section', { class: 'tm-census', id: 'tm-census', 'aria-labelledby': 'tm-census-title' });
    this.linkBox = h('section', { class: 'tm-link', id: 'tm-link', 'aria-labelledby': 'tm-link-title' });
    this.csvButton = h(
      'button',
      {
        type: 'button',
        class: 'ghost',
        id: 'tm-export-csv',
        title: 'the role of every head of both models as CSV (the toolbar exports the view as PNG or SVG)',
        disabled: true,
        onclick: () => this.downloadCsv(),
      },
      'Download CSV',
    );
    this.el = h(
      'section',
      { class: 'view twomodels-view', id: 'twomodels-view', 'aria-labelledby': 'twomodels-title' },
      h('div', { class: 'view-head' }, h('h2', { id: 'twomodels-title' }, 'Two models on one text'), this.csvButton),
      this.intro,
      this.single,
      this.choose,
      this.sidesEl,
      this.census,
      this.linkBox,
    );
  }

  /** Draws the page's text on the two chosen models (once per text and pair) and marks the head
   *  the page has selected. The runs are not awaited: each side fills in when its model answers. */
  update(ctx: ViewContext): void {
    const models = this.host.models;
    if (models.length < 2) return this.showSingle(ctx.model);
    this.single.hidden = true;
    const key = JSON.stringify([ctx.state.text, this.pair]);
    if (key !== this.drawnKey) {
      this.drawnKey = key;
      this.text = ctx.state.text;
      this.drawChoice();
      void this.analyse();
    }
    this.markSelected(ctx.state.layer, ctx.state.head);
  }

  /** One model: what this view would show, and how to start the server with two. */
  private showSingle(model: ModelInfo): void {
    this.el.setAttribute('data-state', 'single');
    this.intro.textContent = '';
    for (const el of [this.sidesEl, this.census, this.linkBox]) clear(el);
    this.single.hidden = false;
    this.single.replaceChildren(
      h(
        'p',
        {},
        `This server serves one model (${model.name}). Started with two, this view runs the text on both and shows them side by side: every head of each model by its role, the layers lined up by relative depth, how many heads of each model have each role, and which heads of each link one word to another.`,
      ),
      h('p', {}, 'Start the server with two --model options, for example:'),
      h(
        'pre',
        { class: 'tm-command' },
        'headscope serve --model models/all-MiniLM-L6-v2 --model models/SmolLM2-135M-Instruct',
      ),
    );
  }

  /** With more than two models, two selects choose the pair. */
  private drawChoice(): void {
    const models = this.host.models;
    this.choose.hidden = models.length <= 2;
    if (models.length <= 2) return;
    const select = (side: 0 | 1) => {
      const s = h('select', { id: `tm-model-${side}`, 'aria-label': side === 0 ? 'first model' : 'second model' });
      models.forEach((m, i) => s.appendChild(h('option', { value: String(i) }, m.name)));
      s.value = String(this.pair[side]);
      s.addEventListener('change', () => {
        const next: [number, number] = [...this.pair];
        next[side] = Number(s.value);
        this.pair = next;
        this.drawnKey = JSON.stringify([this.text, this.pair]);
        this.drawChoice();
        void this.analyse();
      });
      return s;
    };
    this.choose.replaceChildren('Compare ', select(0), ' with ', select(1));
  }

  /** Runs the text on both models and draws each side as its run arrives. */
  private async analyse(): Promise<void> {
    const gen = ++this.generation;
    const [a, b] = this.pair.map((i) => this.host.models[i]);
    this.intro.textContent = `The same text read by ${a.name} (${a.n_layer} layers × ${a.n_head} heads) and ${b.name} (${b.n_layer} × ${b.n_head}). Each cell is one head, coloured by the role it plays most clearly; the two grids have the same height, so rows at the same height sit at the same relative depth (layer l of L at (l + ½) / L), the first layer at the top. Point at or tap a head for its evidence.`;
    this.el.setAttribute('data-state', 'loading');
    this.links = null;
    this.csvButton.disabled = true;
    this.sides = this.pair.map((index, side) => this.sideShell(index, side));
    this.sidesEl.replaceChildren(...this.sides.map((s) => s.el));
    this.census.replaceChildren(h('h3', { id: 'tm-census-title' }, 'Roles in each model'), this.waiting('census'));
    this.linkBox.replaceChildren(h('h3', { id: 'tm-link-title' }, 'Which heads link A → B?'), this.waiting('link'));
    await Promise.all(this.sides.map((s) => this.fill(s, gen)));
    if (gen !== this.generation) return;
    const runs = this.sides.map((s) => s.run);
    this.drawCensus(runs);
    this.drawLinkPickers(runs);
    this.csvButton.disabled = !runs.some((r) => r);
    this.el.setAttribute('data-state', runs.every((r) => r) ? 'ready' : 'error');
  }

  private waiting(what: 'census' | 'link'): HTMLElement {
    return h(
      'p',
      { class: 'muted' },
      what === 'census'
        ? 'Counting roles once both models have read the text…'
        : 'Available once both models have read the text…',
    );
  }

  private sideShell(index: number, side: number): Side {
    const m = this.host.models[index];
    const status = h('p', { class: 'tm-status muted', role: 'status' }, `${m.name} is reading the text…`);
    const tokens = h('p', { class: 'tm-tokens' });
    const grid = h('div', { class: 'tm-gridwrap' });
    const card = h(
      'div',
      { class: 'tm-card', 'aria-live': 'polite' },
      'Point at or tap a head to see its role and evidence.',
    );
    const el = h(
      'article',
      { class: 'tm-side', 'data-side': String(side), 'data-model': String(index), 'data-state': 'loading' },
      h('h3', { class: 'tm-name' }, m.name),
      h(
        'p',
        { class: 'muted small tm-dims' },
        `${m.architecture} · ${m.causal ? 'decoder' : 'encoder'} · ${m.n_layer} layers × ${m.n_head} heads${m.n_kv_head !== m.n_head ? ` (${m.n_kv_head} key/value ${m.n_kv_head === 1 ? 'head' : 'heads'})` : ''}`,
      ),
      status,
      tokens,
      grid,
      card,
    );
    return { index, el, status, tokens, grid, card, run: null };
  }

  /** Runs one side's model and draws its tokens and grid, or says why it could not. */
  private async fill(side: Side, gen: number): Promise<void> {
    const m = this.host.models[side.index];
    try {
      const run = await this.host.run(side.index, this.text);
      if (gen !== this.generation) return;
      side.run = run;
      side.status.textContent = run.truncated
        ? `${m.name} reads at most ${run.n_tokens} tokens here: only the beginning of the text is analysed.`
        : `${run.n_tokens} tokens.`;
      this.drawTokens(side, run);
      side.grid.replaceChildren(this.drawGrid(side, m, run));
      side.el.setAttribute('data-state', 'ready');
    } catch (e) {
      if (gen !== this.generation) return;
      side.status.className = 'tm-status error';
      side.status.textContent = `${m.name} could not analyse this text: ${e instanceof ApiError ? e.message : String(e)}`;
      side.el.setAttribute('data-state', 'error');
    }
  }

  private drawTokens(side: Side, run: RunResult): void {
    const shown = run.tokens.slice(0, MAX_TOKENS_SHOWN);
    refill(
      side.tokens,
      ...shown.map((t, i) =>
        h('span', { class: t.special ? 'tm-token special' : 'tm-token', title: `token ${i}` }, tokenShown(t)),
      ),
      run.tokens.length > shown.length
        ? h('span', { class: 'muted' }, ` … ${run.tokens.length - shown.length} more`)
        : null,
    );
  }

  /** Every head as a cell, rows = layers (a CSS grid of one height for every model), with layer
   *  numbers beside it; arrow keys move between cells. */
  private drawGrid(side: Side, m: ModelInfo, run: RunResult): HTMLElement {
    const labels = h('div', { class: 'tm-layers', 'aria-hidden': 'true' });
    const grid = h('div', {
      class: 'tm-grid',
      role: 'grid',
      'aria-label': `every head of ${m.name}: rows are layers, columns heads`,
      style: `grid-template-rows: repeat(${m.n_layer}, 1fr); grid-template-columns: repeat(${m.n_head}, minmax(0, 1fr)); max-width: ${Math.max(160, m.n_head * 30)}px`,
    });
    labels.setAttribute('style', `grid-template-rows: repeat(${m.n_layer}, 1fr)`);
    const every = m.n_layer > 12 ? 5 : 1;
    for (let l = 0; l < m.n_layer; l++) {
      const row = h('div', { class: 'tm-row', role: 'row', style: `grid-row: ${l + 1}; grid-column: 1 / -1` });
      grid.appendChild(row);
      labels.appendChild(h('span', {}, l === 0 || (l + 1) % every === 0 ? String(l + 1) : ''));
      for (let hd = 0; hd < m.n_head; hd++) grid.appendChild(this.cell(side, m, run.heads[l * m.n_head + hd], l, hd));
    }
    grid.addEventListener('keydown', (e) => this.onGridKey(e, grid, m));
    return h('div', { class: 'tm-gridrow' }, labels, grid);
  }

  private cell(side: Side, m: ModelInfo, report: HeadReport, layer: number, head: number): HTMLElement {
    const role = roleInfo(m, report.roles.primary.id);
    const cell = h('button', {
      type: 'button',
      class: 'tm-cell',
      role: 'gridcell',
      tabindex: layer === 0 && head === 0 ? 0 : -1,
      'data-layer': String(layer),
      'data-head': String(head),
      'data-role': role.id,
      style: `grid-row: ${layer + 1}; grid-column: ${head + 1}; background: ${role.color}`,
      'aria-label': `${layerName(layer)}, head ${head + 1}: ${report.roles.primary.label}`,
    });
    // Pointing shows a head's card unless a click has pinned one (the pointer may then cross other
    // cells on its way to the card's button); a click pins its head, a second click releases it.
    const pinned = () => side.card.classList.contains('pinned');
    const isThis = () => side.card.dataset.layer === String(layer) && side.card.dataset.head === String(head);
    cell.addEventListener('mouseenter', () => {
      if (!pinned()) this.showCard(side, m, report);
    });
    cell.addEventListener('focus', () => this.showCard(side, m, report, pinned()));
    cell.addEventListener('click', () => {
      const release = pinned() && isThis();
      this.showCard(side, m, report, !release);
    });
    return cell;
  }

  /** Arrow keys move the focus (and the card) between the cells of a grid. */
  private onGridKey(e: KeyboardEvent, grid: HTMLElement, m: ModelInfo): void {
    const from = e.target as HTMLElement;
    const moves: Record<string, [number, number]> = {
      ArrowUp: [-1, 0],
      ArrowDown: [1, 0],
      ArrowLeft: [0, -1],
      ArrowRight: [0, 1],
    };
    const move = moves[e.key];
    if (!move || !from.classList.contains('tm-cell')) return;
    e.preventDefault();
    e.stopPropagation();
    const l = Math.max(0, Math.min(m.n_layer - 1, Number(from.dataset.layer) + move[0]));
    const hd = Math.max(0, Math.min(m.n_head - 1, Number(from.dataset.head) + move[1]));
    const to = grid.querySelector<HTMLElement>(`.tm-cell[data-layer="${l}"][data-head="${hd}"]`);
    if (!to) return;
    from.tabIndex = -1;
    to.tabIndex = 0;
    to.focus();
  }

  /** A head's card: its role, the evidence in words, its links on this text; for the page's own
   *  model a button that opens the head in the other views. */
  private showCard(side: Side, m: ModelInfo, report: HeadReport, pin = false): void {
    const { layer, head, roles } = report;
    const role = roleInfo(m, roles.primary.id);
    const labels = side.run?.tokens.map(tokenShown) ?? [];
    const links = report.on_text?.links ?? [];
    side.card.classList.toggle('pinned', pin);
    side.card.setAttribute('data-layer', String(layer));
    side.card.setAttribute('data-head', String(head));
    refill(
      side.card,
      h('strong', {}, `${m.name} · ${layerWithIndex(layer)} · ${headWithIndex(head)}`),
      h(
        'p',
        {},
        h('span', { class: 'tm-swatch', style: `background: ${role.color}` }),
        ` ${roles.primary.label}`,
        roles.confidence !== null ? ` (confidence ${fixed(roles.confidence, 2)})` : '',
        roles.secondary ? `; next: ${roles.secondary.label}` : '',
      ),
      h('p', { class: 'small' }, roles.primary.evidence),
      links.length
        ? h('p', { class: 'small muted' }, `Strongest links on this text: ${linksText(links, labels)}.`)
        : null,
      side.index === 0
        ? h(
            'button',
            { type: 'button', class: 'tm-open', onclick: () => this.host.open(layer, head) },
            `Study ${headTag(layer, head)} in the other views`,
          )
        : h(
            'p',
            { class: 'small muted' },
            `The other views show ${this.host.models[0].name}, the server's first model.`,
          ),
    );
  }

  /** Outlines the head the page has selected on the side of the page's own model. */
  private markSelected(layer: number, head: number): void {
    for (const side of this.sides) {
      side.grid.querySelector('.tm-cell.selected')?.classList.remove('selected');
      if (side.index === 0)
        side.grid.querySelector(`.tm-cell[data-layer="${layer}"][data-head="${head}"]`)?.classList.add('selected');
    }
  }

  /** How many heads of each model have each primary role: counts, shares and paired bars. */
  private drawCensus(runs: (RunResult | null)[]): void {
    const title = h('h3', { id: 'tm-census-title' }, 'Roles in each model');
    const models = this.pair.map((i) => this.host.models[i]);
    const counts = runs.map((r, s) =>
      r
        ? roleCensus(
            r.heads,
            models[s].roles.map((x) => x.id),
          )
        : null,
    );
    if (!counts[0] || !counts[1]) {
      this.census.replaceChildren(title, h('p', { class: 'muted' }, 'The census needs both models’ runs.'));
      return;
    }
    const [a, b] = counts as [CensusEntry[], CensusEntry[]];
    const head = h(
      'tr',
      {},
      h('th', { scope: 'col' }, 'Primary role'),
      ...models.map((m) => h('th', { scope: 'col' }, `${m.name} (${m.n_layer * m.n_head} heads)`)),
    );
    const rows = censusRows(a, b).map((id) => {
      const info = roleInfo(models[0].roles.some((r) => r.id === id) ? models[0] : models[1], id);
      return h(
        'tr',
        { 'data-role': id },
        h(
          'th',
          { scope: 'row' },
          h('span', { class: 'tm-swatch', style: `background: ${info.color}` }),
          ` ${info.name}`,
        ),
        ...[a, b].map((list, s) =>
          this.censusCell(list.find((e) => e.id === id) ?? { id, count: 0, share: 0 }, info.color, s),
        ),
      );
    });
    this.census.replaceChildren(
      title,
      h(
        'p',
        { class: 'muted small' },
        'How many heads of each model have each role as their primary role on this text, and their share of the model’s heads. Models of different sizes compare by the shares.',
      ),
      h(
        'div',
        { class: 'scroll-x' },
        h('table', { class: 'tm-census-table', id: 'tm-census-table' }, h('thead', {}, head), h('tbody', {}, ...rows)),
      ),
    );
  }

  private censusCell(e: CensusEntry, colour: string, side: number): HTMLElement {
    return h(
      'td',
      { 'data-side': String(side), 'data-count': String(e.count) },
      h('span', { class: 'tm-bar', style: `width: ${(e.share * 100).toFixed(1)}%; background: ${colour}` }),
      h('span', { class: 'tm-count' }, `${e.count} (${percent(e.share)})`),
    );
  }

  /** The A → B pickers over the first model's tokens; each model answers for the token of its own
   *  tokenizer that covers the same characters. */
  private drawLinkPickers(runs: (RunResult | null)[]): void {
    const title = h('h3', { id: 'tm-link-title' }, 'Which heads link A → B?');
    const first = runs[0];
    if (!first || !runs[1]) {
      this.linkBox.replaceChildren(title, h('p', { class: 'muted' }, 'This needs both models’ runs.'));
      return;
    }
    const content = first.tokens.map((t, i) => (t.special ? -1 : i)).filter((i) => i >= 0);
    const pick = (id: string, label: string, initial: number) => {
      const sel = h('select', { id, 'aria-label': label });
      first.tokens.forEach((t, i) =>
        sel.appendChild(h('option', { value: String(i) }, `${i}: ${tokenLabel(tokenShown(t))}`)),
      );
      sel.value = String(initial);
      return sel;
    };
    const q = pick('tm-link-query', 'query token A', content[Math.max(0, content.length - 2)] ?? 0);
    const k = pick('tm-link-key', 'key token B', content[1] ?? content[0] ?? 0);
    const out = h('div', { class: 'tm-link-sides', id: 'tm-link-sides' });
    const go = () => void this.askLink(runs as RunResult[], Number(q.value), Number(k.value), out);
    this.linkBox.replaceChildren(
      title,
      h(
        'p',
        { class: 'muted small' },
        `Pick a query token A and a key token B (as ${this.host.models[this.pair[0]].name} splits the text); each model is asked for the token of its own that covers the same characters, and lists the heads whose attention from A to B is strongest.`,
      ),
      h(
        'p',
        { class: 'tm-link-pick' },
        'From ',
        q,
        ' to ',
        k,
        ' ',
        h('button', { type: 'button', class: 'primary', id: 'tm-link-go', onclick: go }, 'Rank heads on both'),
      ),
      out,
    );
  }

  /** Asks both models for their strongest heads from A to B, each side drawn when it answers. */
  private async askLink(runs: RunResult[], q: number, k: number, out: HTMLElement): Promise<void> {
    const gen = this.generation;
    const qt = runs[0].tokens[q],
      kt = runs[0].tokens[k];
    this.linkBox.setAttribute('data-state', 'loading');
    const sides = this.pair.map((index, s) => {
      const el = h('div', {
        class: 'tm-link-side',
        'data-side': String(s),
        'data-model': String(index),
        'data-state': 'loading',
      });
      el.append(h('h4', {}, this.host.models[index].name), h('p', { class: 'muted' }, 'asking…'));
      return el;
    });
    out.replaceChildren(...sides);
    this.links = [null, null];
    await Promise.all(
      sides.map(async (el, s) => {
        const mq = tokenCovering(runs[s].tokens, qt),
          mk = tokenCovering(runs[s].tokens, kt);
        await this.linkSide(el, s, runs[s], mq, mk, gen);
      }),
    );
    if (gen === this.generation) this.linkBox.setAttribute('data-state', 'ready');
  }

  private async linkSide(
    el: HTMLElement,
    side: number,
    run: RunResult,
    q: number,
    k: number,
    gen: number,
  ): Promise<void> {
    const index = this.pair[side];
    const m = this.host.models[index];
    const name = h('h4', {}, m.name);
    if (q < 0 || k < 0) {
      el.replaceChildren(
        name,
        h('p', { class: 'error' }, `${m.name} did not read that part of the text (it reads only the beginning).`),
      );
      el.setAttribute('data-state', 'error');
      return;
    }
    const label = (i: number) => `'${tokenShown(run.tokens[i])}' (token ${i})`;
    try {
      const r = await this.host.link(index, this.text, q, k);
      if (gen !== this.generation) return;
      if (this.links)
        this.links[side] = { from: tokenShown(run.tokens[q]), to: tokenShown(run.tokens[k]), heads: r.heads };
      el.setAttribute('data-q', String(q));
      el.setAttribute('data-k', String(k));
      refill(
        el,
        name,
        h('p', { class: 'small' }, `From ${label(q)} to ${label(k)}`),
        m.causal && q < k
          ? h(
              'p',
              { class: 'small muted' },
              `${m.name} reads left to right: a token cannot attend to a later one, so every weight is 0.`,
            )
          : null,
        h('ol', { class: 'tm-link-heads' }, ...r.heads.map((x) => this.linkItem(m, x, r.sink_columns))),
      );
      el.setAttribute('data-state', 'ready');
    } catch (e) {
      if (gen !== this.generation) return;
      el.replaceChildren(name, h('p', { class: 'error' }, e instanceof ApiError ? e.message : String(e)));
      el.setAttribute('data-state', 'error');
    }
  }

  private linkItem(m: ModelInfo, x: LinkResult['heads'][number], sink: string): HTMLElement {
    const role = roleInfo(m, x.roles.primary.id);
    return h(
      'li',
      { 'data-layer': String(x.layer), 'data-head': String(x.head), 'data-weight': String(x.weight ?? '') },
      h('strong', {}, headTag(x.layer, x.head)),
      ` ${fixed(x.weight, 2)} `,
      h('span', { class: 'muted small' }, `(${fixed(x.weight_no_sink, 2)} without ${sink}) `),
      h('span', { class: 'tm-swatch', style: `background: ${role.color}` }),
      ` ${x.roles.primary.label}`,
    );
  }

  /** The two models as the exports name them. */
  private pairModels(): [ModelInfo, ModelInfo] {
    return [this.host.models[this.pair[0]], this.host.models[this.pair[1]]];
  }

  /** The view as a picture: both grids, the census and the A → B answers (null before any run). */
  scene(): Scene | null {
    if (this.host.models.length < 2 || !this.sides.some((s) => s.run)) return null;
    return twoModelsScene(
      this.sides.map((s) => ({ model: this.host.models[s.index], run: s.run })),
      this.links,
    );
  }

  exportParts(): (string | number)[] {
    return ['models'];
  }

  /** File names start with both models: headscope-A-vs-B-models.png. */
  exportSubject(): string[] {
    if (this.host.models.length < 2) return [this.host.models[0]?.name ?? 'model'];
    const [a, b] = this.pairModels();
    return [a.name, 'vs', b.name];
  }

  captionFacts(): string {
    if (this.host.models.length < 2) return '';
    const [a, b] = this.pairModels();
    return `${a.name} and ${b.name} · each head coloured by its primary role on this text`;
  }

  private downloadCsv(): void {
    if (!this.sides.some((s) => s.run)) return;
    const sides = this.sides.map((s) => ({ model: this.host.models[s.index], run: s.run }));
    download(
      twoModelsCsv(sides, this.text),
      exportName([...this.exportSubject(), 'models', 'roles'], 'csv'),
      'text/csv',
    );
  }
}
