// Entry of the embedded explorer (vite.embed.config.ts builds it into ONE script that also adds
// the stylesheet): the explorer's own views, drawn from a run and its attention embedded in the page
// instead of fetched from `headscope serve`. python/headscope/views.py writes the page:
//   <div id="headscope-root"></div>
//   <script type="application/json" id="headscope-payload">{…"headscope.embed/1"…}</script>
//   <script>…this bundle…</script>
// No network, no CDN: everything the page needs is in it. What needs the model (ablation,
// generation, the W_O decomposition, other texts) says so instead (lib/embedded.ts).

import './styles.css';
import { ApiError } from './lib/api';
import { h } from './lib/dom';
import { EmbeddedClient, NEEDS_MODEL, type EmbedPayload } from './lib/embedded';
import { DEFAULT_STATE, type ViewState } from './lib/state';
import { applyTheme } from './lib/theme';
import { unitsOf } from './lib/units';
import { headWithIndex, layerWithIndex } from './lib/numbering';
import type { MountedView, ViewContext, ViewHost } from './views/context';
import { HeadPanel } from './views/head-panel/head-panel';
import { VIEWS } from './views';
import { ProjectionView } from './views/projection/projection-view';

/** The views an embedded result can open: the registered tab views, the selected head's panel
 *  and the W_O projection (whose numbers need the model: it shows the diagram and says so). */
/** Tab views that run the model themselves (patching, the logit lens) are left out. */
const EMBEDDED_TAB_VIEWS = VIEWS.filter((v) => !v.needsModel);

export const EMBED_VIEWS: readonly { id: string; label: string }[] = [
  ...EMBEDDED_TAB_VIEWS.map((v) => ({ id: v.id, label: v.label })),
  { id: 'head', label: 'Selected head' },
  { id: 'projection', label: 'W_O projection' },
];

class EmbeddedExplorer {
  private state: ViewState;
  private views: Map<string, MountedView>;
  private headPanel: HeadPanel;
  private projection: ProjectionView;
  private tabs: HTMLElement;
  private layerSelect: HTMLSelectElement;
  private headSelect: HTMLSelectElement;
  private slot: HTMLElement;
  private generation = 0;

  constructor(
    private readonly root: HTMLElement,
    private readonly api: EmbeddedClient,
  ) {
    const p = api.payload,
      m = api.modelInfo;
    const clamp = (v: number | undefined, n: number) => Math.max(0, Math.min(n - 1, Math.trunc(v ?? 0)));
    const view = EMBED_VIEWS.some((v) => v.id === p.view) ? p.view! : 'layer';
    const layer = clamp(p.layer, m.n_layer),
      head = clamp(p.head, m.n_head);
    this.state = {
      ...DEFAULT_STATE,
      text: p.run.text,
      view,
      layer,
      head,
      token: Math.min(1, p.run.n_tokens - 1),
      compareA: { layer, head },
      compareB: { layer, head: (head + 1) % m.n_head },
    };
    const change = (patch: Partial<ViewState>) => this.setState(patch);
    const host: ViewHost = {
      change,
      attention: (...args) => this.api.attention(...args),
      patch: (request) => this.api.patch(request),
      saliency: (request) => this.api.saliency(request),
      logitLens: (...args) => this.api.logitLens(...args),
      headLens: (request) => this.api.headLens(request),
      tokenize: (...args) => this.api.tokenize(...args),
      composition: (request) => this.api.composition(request),
      headMap: () => this.api.headMap(),
    };
    this.views = new Map(EMBEDDED_TAB_VIEWS.map((v) => [v.id, v.create(host)]));
    this.headPanel = new HeadPanel(
      () => {},
      () => {},
      (layer, head, mode) => this.api.ablate(this.state.text, [[layer, head]], mode),
      () => {},
    );
    this.projection = new ProjectionView({ selectToken: (token) => this.setState({ token }) });
    this.tabs = h('nav', { class: 'tabs', role: 'tablist', 'aria-label': 'views' });
    const options = (n: number, name: (i: number) => string) =>
      Array.from({ length: n }, (_, i) => h('option', { value: i }, name(i)));
    this.layerSelect = h(
      'select',
      {
        id: 'embed-layer',
        'aria-label': 'layer',
        onchange: () => this.setState({ layer: Number(this.layerSelect.value) }),
      },
      ...options(m.n_layer, layerWithIndex),
    );
    this.headSelect = h(
      'select',
      {
        id: 'embed-head',
        'aria-label': 'head',
        onchange: () => this.setState({ head: Number(this.headSelect.value) }),
      },
      ...options(m.n_head, headWithIndex),
    );
    this.slot = h('div', { class: 'panel views', id: 'views' });
  }

  mount(): void {
    const m = this.api.modelInfo,
      run = this.api.payload.run;
    this.root.replaceChildren(
      h(
        'header',
        { class: 'top' },
        h('span', { class: 'brand' }, 'headscope'),
        h(
          'span',
          { class: 'model-chip', id: 'model-chip' },
          h('strong', { id: 'model-name' }, m.name),
          h('span', { class: 'model-dims' }, ` · ${m.n_layer} layers × ${m.n_head} heads · ${run.n_tokens} tokens`),
        ),
      ),
      h(
        'main',
        {},
        h('p', { class: 'embed-text', id: 'embed-text' }, run.text),
        h(
          'div',
          { class: 'panel toolbar embed-toolbar' },
          this.tabs,
          h('label', {}, 'Layer ', this.layerSelect),
          h('label', {}, ' Head ', this.headSelect),
        ),
        this.slot,
        h(
          'p',
          { class: 'muted small', id: 'embed-note' },
          'Embedded result: the attention of this text and its statistics only. Ablation, head importance, generation, the W_O decomposition, word level and other texts need the model: open the text in `headscope serve` for them.',
        ),
      ),
    );
    void this.render();
  }

  private setState(patch: Partial<ViewState>): void {
    this.state = { ...this.state, ...patch };
    void this.render();
  }

  private async render(): Promise<void> {
    const gen = ++this.generation;
    const s = this.state,
      m = this.api.modelInfo,
      run = this.api.payload.run;
    // Attention from elsewhere (show_attention) has no model dimensions: no W_O diagram to draw.
    this.tabs.replaceChildren(
      ...EMBED_VIEWS.filter((v) => v.id !== 'projection' || m.d_model > 0).map((v) =>
        h(
          'button',
          {
            type: 'button',
            role: 'tab',
            class: v.id === s.view ? 'tab active' : 'tab',
            'data-view': v.id,
            'aria-selected': String(v.id === s.view),
            onclick: () => this.setState({ view: v.id }),
          },
          v.label,
        ),
      ),
    );
    this.layerSelect.value = String(s.layer);
    this.headSelect.value = String(s.head);
    try {
      const ctx: ViewContext = {
        model: m,
        state: s,
        run,
        units: unitsOf(run, 'token'),
        maps: 'weights',
        importance: null,
        importanceStatus: `head importance ${NEEDS_MODEL}`,
      };
      const layer = await this.api.attention(s.text, 'token', s.layer);
      if (gen !== this.generation) return;
      const tab = this.views.get(s.view);
      if (tab) {
        this.slot.replaceChildren(tab.el);
        await tab.render(ctx, layer);
      } else if (s.view === 'head') {
        this.slot.replaceChildren(this.headPanel.el);
        this.headPanel.update(ctx, layer);
      } else {
        this.slot.replaceChildren(this.projection.el);
        this.projection.update(ctx, null, `The W_O decomposition of a token ${NEEDS_MODEL}.`);
      }
      if (gen !== this.generation) return;
      document.body.setAttribute('data-ready', String(gen));
    } catch (e) {
      this.slot.replaceChildren(h('p', { class: 'fatal' }, e instanceof ApiError ? e.message : String(e)));
      document.body.setAttribute('data-ready', `error-${gen}`);
    }
  }
}

function start(): void {
  applyTheme(document.documentElement);
  const root = document.getElementById('headscope-root');
  const source = document.getElementById('headscope-payload');
  if (!root || !source) return;
  try {
    const payload = JSON.parse(source.textContent ?? '') as EmbedPayload;
    new EmbeddedExplorer(root, new EmbeddedClient(payload)).mount();
  } catch (e) {
    root.replaceChildren(h('p', { class: 'fatal' }, `headscope: cannot show this result (${(e as Error).message})`));
    document.body.setAttribute('data-ready', 'error');
  }
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
