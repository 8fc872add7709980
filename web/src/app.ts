// The explorer: owns the view state, asks the API for what the state needs, and hands each view
// its data. Views report user actions through callbacks; every change goes through setState,
// which also writes the state into the URL. The tab views come from the registry in
// views/index.ts; nothing here names one.

import {
  ApiClient,
  ApiError,
  type Decomposition,
  type ImportanceResult,
  type ModelInfo,
  type RunResult,
} from './lib/api';
import {
  AUTO_IMPORTANCE_MAX_HEADS,
  AUTO_IMPORTANCE_MAX_TOKENS,
  importanceRefusal,
  importanceTooLong,
} from './views/ablation/importance';
import { SCALES } from './lib/colour';
import { h } from './lib/dom';
import { download, exportName, scenePng, sceneSvg, statsToCsv, statsToJson } from './lib/export';
import { enterCompare, stateFromQuery, stateToQuery, type ViewState } from './lib/state';
import { unitsOf } from './lib/units';
import { headWithIndex, layerWithIndex, NUMBERING_NOTE } from './lib/numbering';
import { withCaption } from './lib/scene';
import { THEME } from './lib/theme';
import { tokenShown } from './lib/units';
import type { ExportableView, MountedView, ViewContext, ViewHost } from './views/context';
import { HeadPanel, type TileFetcher } from './views/head-panel/head-panel';
import type { Tensor } from './lib/wire';
import type { Region } from './lib/long';
import { VIEW_IDS, VIEWS } from './views';
import { learningContext } from './views/lesson/learning-context';
import { MAP_LABELS, MAP_VIEWS, shownMapView } from './lib/maps';
import { WhyHeadsView } from './views/lesson/why-heads';
import { ProjectionView } from './views/projection/projection-view';
import { SentenceView, textBeforeByte } from './views/sentence/sentence-view';
import { Toolbar } from './views/toolbar/toolbar';

/** For the page's tests: body[data-importance] says where the importance of the text stands. */
function importanceState(imp: ImportanceResult | string | undefined): string {
  return imp === undefined ? 'none' : typeof imp === 'object' ? 'ready' : imp === 'measuring' ? 'measuring' : 'error';
}

export class App {
  private state: ViewState;
  private generation = 0;
  private ctx: ViewContext | null = null;
  private sentence: SentenceView;
  private toolbar: Toolbar;
  /** The registered tab views by id, in tab order. */
  private views: Map<string, MountedView>;
  private headPanel: HeadPanel;
  private projection: ProjectionView;
  private why: WhyHeadsView;
  private busy: HTMLElement;
  private progress: HTMLElement;
  private help: HTMLElement;
  private longNotice: HTMLElement;
  /** Every head's ablation effect per text: the reply, 'measuring', or the server's refusal. */
  private importances = new Map<string, ImportanceResult | string>();
  /** What the last complete refresh drew from, so that importance can be drawn in without one. */
  private drawn: {
    layer: Tensor;
    mapsLayer: Tensor;
    follows: boolean;
    dec: Decomposition | null;
    plain: RunResult;
    tile?: TileFetcher;
  } | null = null;
  /** Set by Generate (and by a reload of its steps): the next refresh locks the selected step. */
  private lockStep = false;

  constructor(
    private readonly root: HTMLElement,
    private readonly api: ApiClient,
    private readonly model: ModelInfo,
    /** Every model the server serves (GET /api/models), the page's own first. */
    private readonly served: readonly ModelInfo[] = [model],
  ) {
    this.state = stateFromQuery(location.search, model, VIEW_IDS);
    const change = (patch: Partial<ViewState>) => this.setState(patch);
    this.sentence = new SentenceView(
      {
        analyse: (text) => this.setState({ text, lock: -1 }),
        count: (text) => this.countText(text),
        fit: (text) => this.fitText(text),
        // The views show another text than the box (or the box is empty): they are dimmed.
        stale: (why) => document.body.classList.toggle('stale', why !== null),
        ...(model.causal
          ? {
              generate: (text: string, n: number) => void this.generate(text, n),
              // A step shows the row that produced its token: the query one position before it.
              selectStep: (position: number) =>
                this.setState({ token: position - 1, lock: this.unitOfToken(position - 1) }),
            }
          : {}),
      },
      model.limits.max_tokens,
    );
    this.toolbar = new Toolbar(
      {
        change,
        openView: (view) => this.openView(view),
        exportView: (f) => void this.exportView(f),
        exportStats: (f) => this.exportStats(f),
      },
      VIEWS,
      model.n_layer,
      model.n_head,
    );
    const host = this.viewHost();
    this.views = new Map(VIEWS.map((v) => [v.id, v.create(host)]));
    this.headPanel = new HeadPanel(
      (unit) => {
        const token = this.ctx?.units.tokens[unit]?.[0];
        if (token !== undefined) this.setState({ token });
      },
      (format) => void this.exportScene(this.headPanel, format),
      (layer, head, mode) => this.api.ablate(this.state.text, [[layer, head]], mode),
      () => this.measureImportance(this.state.text),
      (r) => this.onRegion(r),
    );
    this.projection = new ProjectionView({ selectToken: (token) => this.setState({ token }) });
    this.why = new WhyHeadsView(
      (text, heads) => this.api.ablate(text, heads, 'zero'),
      () => this.measureImportance(this.state.text),
    );
    this.busy = h('span', { class: 'busy', id: 'busy', 'aria-live': 'polite' });
    this.progress = h('progress', { id: 'progress', 'aria-label': 'computing', hidden: true });
    this.help = this.helpDialog();
    this.longNotice = h('p', { class: 'panel muted', id: 'long-notice', hidden: true });
  }

  /** What the tab views may ask of the page: state changes and the server's answers. */
  private viewHost(): ViewHost {
    return {
      change: (patch) => this.setState(patch),
      attention: (...args) => this.api.attention(...args),
      patch: (request) => this.api.patch(request),
      saliency: (request) => this.api.saliency(request),
      logitLens: (...args) => this.api.logitLens(...args),
      headLens: (request) => this.api.headLens(request),
      tokenize: (...args) => this.api.tokenize(...args),
      composition: (request) => this.api.composition(request),
      headMap: () => this.api.headMap(),
      overview: (...args) => this.api.overview(...args),
      tile: (...args) => this.api.tile(...args),
      showRegion: (r) => this.headPanel.showRegion(r),
      models: { list: this.served, client: (index) => (index === 0 ? this.api : this.api.forModel(index)) },
    };
  }

  mount(): void {
    const m = this.model;
    this.root.replaceChildren(
      h(
        'header',
        { class: 'top' },
        h('span', { class: 'brand' }, 'headscope'),
        h(
          'span',
          {
            class: 'model-chip',
            id: 'model-chip',
            title: `${m.name} · ${m.architecture} · ${m.n_layer} layers × ${m.n_head} heads · d_model ${m.d_model} · d_head ${m.d_head}`,
          },
          h('strong', { id: 'model-name' }, m.name),
          h(
            'span',
            { class: 'model-dims' },
            ` · ${m.architecture} · ${m.n_layer} layers × ${m.n_head} heads · d_model ${m.d_model} · d_head ${m.d_head}`,
          ),
        ),
        this.progress,
        this.busy,
        h('button', { type: 'button', class: 'ghost', onclick: () => this.toggleHelp() }, 'Keys (?)'),
      ),
      h(
        'main',
        {},
        learningContext(
          m,
          h(
            'p',
            { class: 'lead' },
            `${m.n_head} heads in each of the ${m.n_layer} layers of ${m.name} read the same sentence, each with its own weights, and many of them end up watching different things: the next word, the sentence boundary, a related word further away.`,
          ),
          h(
            'p',
            {},
            'A layer does not pick one of these views. It runs all heads in parallel, puts their answers side by side and mixes them with one matrix. Everything below is computed live by the model on the text you give it.',
          ),
          h('p', { class: 'muted', id: 'numbering-note' }, NUMBERING_NOTE),
        ),
        this.sentence.el,
        this.toolbar.el,
        this.longNotice,
        h('div', { class: 'panel views', id: 'views' }, ...[...this.views.values()].map((v) => v.el)),
        this.headPanel.el,
        this.projection.el,
        this.why.el,
        h(
          'footer',
          {},
          h(
            'p',
            {},
            'headscope explorer · numbers from the model running on this machine; the HTTP API behind this page is described in docs/api.md.',
          ),
        ),
      ),
      this.help,
    );
    document.addEventListener('keydown', (e) => this.onKey(e));
    window.addEventListener('popstate', () => {
      const before = this.state.view;
      this.state = stateFromQuery(location.search, this.model, VIEW_IDS);
      if (this.state.view !== before) this.scrollToViews();
      void this.refresh();
    });
    if (this.sentence.generationFor(this.state.text)) this.lockStep = true;
    void this.refresh();
  }

  setState(patch: Partial<ViewState>): void {
    const next = { ...this.state, ...patch };
    // Compare opens on the selected head (and the next one), unless the change names the pair.
    if (next.view === 'compare' && this.state.view !== 'compare' && !patch.compareA && !patch.compareB)
      Object.assign(next, enterCompare(next, this.model));
    if (patch.level && patch.level !== this.state.level) next.lock = -1;
    if (patch.text !== undefined && patch.text !== this.state.text) {
      // A new text keeps a token and lock only when the change names them (Generate does).
      if (patch.token === undefined) next.token = Math.min(next.token, 1);
      if (patch.lock === undefined) next.lock = -1;
    }
    // A change of view or of what the maps show is a history entry (Back returns to it).
    const viewChanged = next.view !== this.state.view || next.maps !== this.state.maps;
    this.state = next;
    const query = stateToQuery(this.state);
    // A change of view is a history entry (Back and Forward move between views); other changes
    // replace the current entry, so that Back does not step through every head.
    if (query !== location.search.slice(1)) {
      const url = `${location.pathname}?${query}`;
      if (viewChanged) history.pushState(null, '', url);
      else history.replaceState(null, '', url);
    }
    void this.refresh();
  }

  /** A tab: opens its view and brings it into sight under the sticky bars. */
  private openView(view: string): void {
    this.setState({ view });
    this.scrollToViews();
  }

  private scrollToViews(): void {
    document.getElementById('views')?.scrollIntoView({ block: 'start' });
  }

  /** While the server computes: the shown views dimmed (body.computing), the progress bar running,
   *  Analyse and Generate disabled; `what` says what is computed, null when done. */
  private setBusy(what: string | null): void {
    this.busy.textContent = what ?? '';
    this.progress.hidden = what === null;
    document.body.classList.toggle('computing', what !== null);
    this.sentence.setBusy(what !== null);
  }

  /** Brings every view up to date with the state; a newer call abandons an older one. */
  private async refresh(): Promise<void> {
    const gen = ++this.generation;
    const stale = () => gen !== this.generation;
    const s = this.state;
    this.toolbar.update(s);
    this.setBusy('computing…');
    try {
      const [run, plain] = await Promise.all([
        this.api.run(s.text, s.level, s.hideSpecial ? 'hide' : 'keep'),
        this.api.run(s.text, s.level, 'hide'),
      ]);
      if (stale()) return;
      const ctx = this.prepare(run);
      const { state } = ctx;
      // A long text's maps were streamed: the layer's pooled overview stands in for its maps, and
      // the head panel zooms into exact tiles.
      const streamed = !!run.streamed;
      const layer = streamed
        ? await this.api.overview(state.text, state.layer)
        : await this.api.attention(state.text, state.level, state.layer);
      // The layer grid and the head panel draw the chosen maps; the other views keep the weights.
      const mapsLayer =
        ctx.maps === 'weights'
          ? layer
          : await this.api.attention(state.text, state.level, state.layer, 'float32', ctx.maps);
      if (stale()) return;
      const tile: TileFetcher | undefined = streamed
        ? (l, hd, r, view) => this.api.tile(state.text, l, hd, r.q0, r.q1, r.k0, r.k1, view)
        : undefined;
      // The head panel first: on a long text a view may draw the region of its zoomable map.
      this.headPanel.update(ctx, mapsLayer, tile);
      const viewCtx = streamed ? { ...ctx, region: this.headPanel.region } : ctx;
      this.ctx = viewCtx;
      const follows = await this.renderView(viewCtx, layer, mapsLayer);
      if (stale()) return;
      const dec = await this.decomposition(ctx);
      if (stale()) return;
      this.projection.update(ctx, dec, streamed ? this.streamedDecomposition(run) : undefined);
      this.why.update(ctx, dec, plain);
      this.drawn = { layer, mapsLayer, follows, dec, plain, tile };
      // Importance that arrived while this refresh ran is drawn in now.
      const imp = ctx.importance ?? ctx.importanceStatus;
      if (this.importances.get(state.text) !== imp) void this.drawImportance(state.text);
      else document.body.setAttribute('data-importance', importanceState(imp));
      this.setBusy(null);
      document.body.classList.remove('stale');
      document.body.setAttribute('data-ready', String(gen));
    } catch (e) {
      if (stale()) return;
      this.setBusy(null);
      this.showError(s.text, e);
      document.body.setAttribute('data-ready', `error-${gen}`);
    }
  }

  /** Fits the state to a new run and builds what every view receives; the text box, its counts
   *  and the toolbar follow the run. */
  private prepare(run: RunResult): ViewContext {
    this.fitState(run);
    let units = unitsOf(run, this.state.level);
    if (this.lockStep) {
      // After Generate (or a reload of its steps): the selected step is the locked query.
      this.lockStep = false;
      const lock = units.tokens.findIndex((toks) => toks.includes(this.state.token));
      if (lock !== this.state.lock) {
        this.state = { ...this.state, lock };
        history.replaceState(null, '', `${location.pathname}?${stateToQuery(this.state)}`);
      }
      units = unitsOf(run, this.state.level);
    }
    const state = this.state;
    // Importance of every head: measured at once for short texts on small models, else on request.
    const heads = this.model.n_layer * this.model.n_head;
    if (
      heads <= AUTO_IMPORTANCE_MAX_HEADS &&
      run.n_tokens <= AUTO_IMPORTANCE_MAX_TOKENS &&
      importanceTooLong(run.n_tokens, heads) === null &&
      !run.streamed &&
      !this.importances.has(state.text)
    )
      this.measureImportance(state.text, false);
    const imp = this.importances.get(state.text);
    const ctx: ViewContext = {
      model: this.model,
      state,
      run,
      units,
      // Norm-weighted or rollout maps where this run can show them (not streamed, rollout within
      // its token limit); the weights otherwise, and the toolbar says why.
      maps: shownMapView(state.maps, run.views).view,
      importance: typeof imp === 'object' ? imp : null,
      importanceStatus: typeof imp === 'string' ? imp : undefined,
      generated: this.sentence.generationFor(run.text)?.generated.map((g) => g.position) ?? [],
    };
    this.ctx = ctx;
    this.drawn = null;
    this.showRun(run, state);
    return ctx;
  }

  /** The text box's counts, the truncation note and the toolbar for a new run. */
  private showRun(run: RunResult, state: ViewState): void {
    this.sentence.update(
      run.text,
      `${run.n_tokens} tokens · ${run.words.filter((w) => !w.special).length} words${run.truncated ? ' · only the beginning analysed' : ''}`,
      false,
      state.token,
      run.tokens.map(tokenShown),
    );
    this.sentence.showTruncation(
      run.n_tokens,
      run.truncated ? textBeforeByte(run.text, Math.max(0, ...run.tokens.map((t) => t.end))) : null,
      `This text is longer than the ${run.n_tokens} tokens the model reads at once, so only its first ${run.n_tokens} tokens are analysed. `,
    );
    this.toolbar.update(state, run.views);
  }

  /** Shows the state's tab view and draws it; a view that cannot work on a long (streamed) text
   *  gives way to a notice. Returns whether the view draws the chosen maps (else the weights). */
  private async renderView(ctx: ViewContext, layer: Tensor, mapsLayer: Tensor): Promise<boolean> {
    const definition = VIEWS.find((v) => v.id === ctx.state.view) ?? VIEWS[0];
    const follows = !!definition.followsMaps;
    const shownView = ctx.run.streamed && !definition.streamed ? null : definition.id;
    for (const [id, v] of this.views) v.el.hidden = id !== shownView;
    this.longNotice.hidden = shownView !== null;
    if (shownView === null) {
      const onStreamed = VIEWS.filter((v) => v.streamed).map((v) => v.label);
      this.longNotice.textContent = `This view needs every full attention map, which a long text (${ctx.run.n_tokens} tokens) does not keep: its maps were streamed through the statistics. These views work on it: ${onStreamed.join(', ')}; the head panel below zooms into exact weights.`;
    } else await this.activeView().render(follows ? ctx : { ...ctx, maps: 'weights' }, follows ? mapsLayer : layer);
    return follows;
  }

  /** The W_O decomposition of the selected token, or null where the server has none. */
  private async decomposition(ctx: ViewContext): Promise<Decomposition | null> {
    // A streamed run keeps no head outputs (the server answers 422): no W_O decomposition.
    if (ctx.run.streamed) return null;
    try {
      return await this.api.decompose(ctx.state.text, ctx.state.layer, ctx.state.token);
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      return null;
    }
  }

  /** Why a long text has no W_O decomposition, in the reader's words. */
  private streamedDecomposition(run: RunResult): string {
    return `The W_O decomposition needs each head's output at every token, and the server does not keep those for a long text (${run.n_tokens} tokens, its maps streamed through the statistics). Analyse a shorter text to see how the heads' outputs add up to the layer's output.`;
  }

  /** The head panel's map moved to region `r` (a long text): a view that follows the region is
   *  drawn again, with no new analysis. */
  private onRegion(r: Region): void {
    const ctx = this.ctx,
      drawn = this.drawn;
    if (!ctx || !drawn || !ctx.run.streamed) return;
    this.ctx = { ...ctx, region: r };
    const definition = VIEWS.find((v) => v.id === this.state.view);
    const view = this.activeView();
    if (!definition?.followsRegion || view.el.hidden) return;
    void view.render(
      drawn.follows ? this.ctx : { ...this.ctx, maps: 'weights' },
      drawn.follows ? drawn.mapsLayer : drawn.layer,
    );
  }

  /** Asks the server for every head's importance on `text`; the page is drawn again when it
   *  arrives (and at once, to show the progress state, when `redraw`). */
  private measureImportance(text: string, redraw = true): void {
    const known = this.importances.get(text);
    if (known === 'measuring' || typeof known === 'object') return;
    const heads = this.model.n_layer * this.model.n_head;
    this.importances.set(text, 'measuring');
    if (redraw) void this.drawImportance(text);
    this.api
      .importance(text)
      .then((r) => this.importances.set(text, r))
      .catch((e) =>
        this.importances.set(text, e instanceof ApiError ? importanceRefusal(e.code, e.message, heads) : String(e)),
      )
      .finally(() => void this.drawImportance(text));
  }

  /** Draws the importance state of `text` into the views that show it (layer tiles, head panel,
   *  "Why several heads?") when that text is on screen; no new analysis, no new data-ready. */
  private async drawImportance(text: string): Promise<void> {
    const ctx = this.ctx,
      drawn = this.drawn;
    if (!ctx || !drawn || ctx.run.text !== text || this.state.text !== text) return;
    const imp = this.importances.get(text);
    const next: ViewContext = {
      ...ctx,
      importance: typeof imp === 'object' ? imp : null,
      importanceStatus: typeof imp === 'string' ? imp : undefined,
    };
    this.ctx = next;
    const gen = this.generation;
    if (!this.activeView().el.hidden)
      await this.activeView().render(
        drawn.follows ? next : { ...next, maps: 'weights' },
        drawn.follows ? drawn.mapsLayer : drawn.layer,
      );
    if (gen !== this.generation) return;
    this.headPanel.update(next, drawn.mapsLayer, drawn.tile);
    this.why.update(next, drawn.dec, drawn.plain);
    document.body.setAttribute('data-importance', importanceState(imp));
  }

  /** Tokens and words of a typed text (the counters under the box follow it while typing). */
  private async countText(text: string): Promise<{ tokens: number; words: number }> {
    const r = await this.api.tokenize(text);
    const words = new Set(r.tokens.filter((t) => !t.special && t.word >= 0).map((t) => t.word));
    return { tokens: r.n_tokens, words: words.size };
  }

  /** `text` cut so that the model reads all of it: to the server's byte limit, then to the end of
   *  the last token that fits the token limit (special tokens included), checked again with the
   *  tokenizer, so that "Truncate" takes one click. */
  private async fitText(text: string): Promise<string> {
    const { max_tokens, max_text_bytes } = this.model.limits;
    let t = textBeforeByte(text, max_text_bytes).replace(/\uFFFD$/, '');
    try {
      for (let i = 0; i < 4; i++) {
        const r = await this.api.tokenize(t);
        if (r.n_tokens <= max_tokens) return t;
        const content = r.tokens.filter((x) => !x.special);
        const keep = Math.max(1, max_tokens - (r.n_tokens - content.length));
        t = textBeforeByte(t, content[keep - 1]?.end ?? 0).trimEnd();
      }
    } catch {
      // the tokenizer is out of reach: the analysis truncates what is left
    }
    return t;
  }

  /** An error in words for a reader: a text over the server's size limit gets the truncate
   *  button; anything else says what went wrong. The views keep the last text, dimmed. */
  private showError(text: string, e: unknown): void {
    document.body.classList.add('stale');
    const limits = this.model.limits;
    if (e instanceof ApiError && e.code === 'text_too_long') {
      this.sentence.update(text, `This text is too long to analyse here.`, true);
      // Cut to the byte limit (on a character boundary); the analysis then keeps the first tokens.
      const bytes = new TextEncoder().encode(text);
      const keep = textBeforeByte(text, Math.min(bytes.length, limits.max_text_bytes)).replace(/\uFFFD$/, '');
      this.sentence.showTruncation(
        limits.max_tokens,
        keep,
        `The model reads at most ${limits.max_tokens} tokens at once (and this server takes texts of up to ${limits.max_text_bytes.toLocaleString('en')} bytes). `,
      );
      return;
    }
    this.sentence.showTruncation(0, null, '');
    const message = e instanceof ApiError ? e.message : `cannot reach the headscope server: ${(e as Error).message}`;
    this.sentence.update(text, message, true);
  }

  /** The unit (token or word, at the current level) holding token `t`; -1 if hidden. */
  private unitOfToken(t: number): number {
    return this.ctx ? this.ctx.units.tokens.findIndex((toks) => toks.includes(t)) : -1;
  }

  /** "Generate": the server continues the text greedily; the explorer then analyses prompt +
   *  continuation and opens on the first generated step. */
  private async generate(text: string, n: number): Promise<void> {
    this.setBusy('generating…');
    try {
      const g = await this.api.generate(text, n);
      this.sentence.setGeneration(g);
      // The query that produced the first generated token (the prompt's last token).
      const first = Math.max(0, (g.generated[0]?.position ?? 1) - 1);
      // Step 1 selected and locked (refresh finds its unit at the current level), the slider
      // focused so that the arrow keys move through the steps.
      this.lockStep = true;
      this.sentence.focusSteps();
      this.setState({ text: g.text, token: first });
    } catch (e) {
      this.setBusy(null);
      this.showError(text, e);
      document.body.setAttribute('data-ready', `error-generate`);
    }
  }

  /** Keeps indices valid for the current text (a shorter text may not have token 12). */
  private fitState(run: RunResult): void {
    const s = this.state;
    const token = Math.max(0, Math.min(s.token, run.n_tokens - 1));
    const lock = s.lock < run.n_units ? s.lock : -1;
    if (token !== s.token || lock !== s.lock) {
      this.state = { ...s, token, lock };
      history.replaceState(null, '', `${location.pathname}?${stateToQuery(this.state)}`);
    }
  }

  /** The tab view the state names (stateFromQuery admits registered ids only). */
  private activeView(): MountedView {
    return this.views.get(this.state.view) ?? this.views.values().next().value!;
  }

  private async exportView(format: 'png' | 'svg'): Promise<void> {
    await this.exportScene(this.activeView(), format);
  }

  /** Downloads a view's picture with a caption that lets it stand alone: what it shows, the
   *  model, layer, head and role, and the text. */
  private async exportScene(view: ExportableView, format: 'png' | 'svg'): Promise<void> {
    const inner = view.scene();
    const ctx = this.ctx;
    if (!inner || !ctx) return;
    const { state, run } = ctx;
    const role = run.heads[state.layer * this.model.n_head + state.head]?.roles.primary;
    const scene = withCaption(
      inner,
      {
        title: `headscope · ${this.viewTitle(view)}`,
        facts:
          view.captionFacts?.() ??
          `${this.model.name} · ${layerWithIndex(state.layer)} · ${headWithIndex(state.head)}${role ? ` – ${role.label}` : ''} · ${state.level}s${state.hideSpecial ? ', special tokens hidden' : ''} · ${state.scale} scale${view.exportParts().includes(ctx.maps) ? ` · ${MAP_LABELS[ctx.maps].toLowerCase()} maps` : ''}`,
        text: run.text,
      },
      THEME,
    );
    const name = exportName([...(view.exportSubject?.() ?? [this.model.name]), ...view.exportParts()], format);
    if (format === 'svg') download(sceneSvg(scene), name, 'image/svg+xml');
    else download(await scenePng(scene), name);
  }

  private viewTitle(view: ExportableView): string {
    if (view === this.headPanel) return 'selected head';
    for (const v of VIEWS) if (this.views.get(v.id) === view) return `${v.label} view`;
    return 'view';
  }

  private exportStats(format: 'csv' | 'json'): void {
    const run = this.ctx?.run;
    if (!run) return;
    const name = exportName(
      [this.model.name, 'stats', run.level, ...(run.special === 'hide' ? ['no-specials'] : [])],
      format,
    );
    if (format === 'csv') download(statsToCsv(run, this.model.statistics_catalogue, this.model.name), name, 'text/csv');
    else download(statsToJson(this.model, run), name, 'application/json');
  }

  private helpDialog(): HTMLElement {
    const keys: [string, string][] = [
      ['← →', 'previous / next head'],
      ['↑ ↓', 'previous / next layer'],
      ['[ ]', 'previous / next token for the W_O decomposition'],
      [VIEWS.map((_, i) => i + 1).join(' '), VIEWS.map((v) => v.label.toLowerCase()).join(' · ')],
      ['w', 'tokens ↔ words'],
      ['s', 'hide / show special tokens'],
      ['c', 'next colour scale'],
      ['n', 'maps: weights → norm-weighted → rollout'],
      ['Esc', 'release a locked token, close this help'],
      ['Tab', 'move between controls; Enter or Space activates'],
    ];
    return h(
      'div',
      { class: 'help', id: 'help', role: 'dialog', 'aria-label': 'keyboard shortcuts', hidden: true },
      h('h2', {}, 'Keyboard'),
      h('dl', {}, ...keys.flatMap(([k, v]) => [h('dt', {}, h('kbd', {}, k)), h('dd', {}, v)])),
      h('button', { type: 'button', class: 'primary', onclick: () => this.toggleHelp(false) }, 'Close'),
    );
  }

  private toggleHelp(show = this.help.hidden): void {
    this.help.hidden = !show;
  }

  private onKey(e: KeyboardEvent): void {
    const target = e.target as HTMLElement;
    if (e.ctrlKey || e.metaKey || e.altKey || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName)) return;
    const s = this.state,
      m = this.model;
    const patch: Partial<ViewState> | null = (() => {
      switch (e.key) {
        case 'ArrowLeft':
          return { head: (s.head + m.n_head - 1) % m.n_head };
        case 'ArrowRight':
          return { head: (s.head + 1) % m.n_head };
        case 'ArrowUp':
          return { layer: (s.layer + m.n_layer - 1) % m.n_layer };
        case 'ArrowDown':
          return { layer: (s.layer + 1) % m.n_layer };
        case '[':
          return { token: Math.max(0, s.token - 1) };
        case ']':
          return { token: Math.min((this.ctx?.run.n_tokens ?? 1) - 1, s.token + 1) };
        case 'w':
          return { level: s.level === 'token' ? 'word' : 'token' };
        case 's':
          return { hideSpecial: !s.hideSpecial };
        case 'c':
          return { scale: SCALES[(SCALES.indexOf(s.scale) + 1) % SCALES.length] };
        case 'n': {
          // The next map view this run can show.
          const views = this.ctx?.run.views;
          for (let i = 1; i <= MAP_VIEWS.length; i++) {
            const next = MAP_VIEWS[(MAP_VIEWS.indexOf(s.maps) + i) % MAP_VIEWS.length];
            if (!views?.[next]) return { maps: next };
          }
          return null;
        }
        case 'Escape':
          if (!this.help.hidden) this.toggleHelp(false);
          return s.lock >= 0 ? { lock: -1 } : null;
        case '?':
          this.toggleHelp();
          return null;
        default: {
          // Digits 1–9 open the registered views in tab order.
          const v = /^[1-9]$/.test(e.key) ? VIEWS[Number(e.key) - 1] : undefined;
          return v ? { view: v.id } : null;
        }
      }
    })();
    if (patch) {
      e.preventDefault();
      this.setState(patch);
    }
  }
}
