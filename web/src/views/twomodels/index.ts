// Registration of "Compare models": the page's text on two models of one server (serve --model A
// --model B), side by side. With one model it explains how to start the server with two.
import type { ViewDefinition } from '../context';
import { TwoModelsView } from './twomodels-view';
import './twomodels.css';

export const twoModelsView: ViewDefinition = {
  id: 'models',
  label: 'Compare models',
  // It runs the text on models of its own, not on the page's maps; long texts are truncated per model.
  streamed: true,
  needsModel: true,
  create(host) {
    const served = host.models;
    const view = new TwoModelsView({
      models: served?.list ?? [],
      run: (index, text) => served!.client(index).run(text, 'token'),
      link: (index, text, q, k) => served!.client(index).link(text, q, k),
      open: (layer, head) => host.change({ view: 'layer', layer, head }),
    });
    return {
      el: view.el,
      scene: () => view.scene(),
      exportParts: () => view.exportParts(),
      exportSubject: () => view.exportSubject(),
      captionFacts: () => view.captionFacts(),
      render: async (ctx) => view.update(ctx),
    };
  },
};
