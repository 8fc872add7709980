// Registration of "Composition": Q-, K- and V-composition of every pair of heads, from the weights
// (POST /api/composition). It reads no text, so it works whatever the explorer's run is; an
// embedded result, which carries no model, leaves it out.
import { mounted, type ViewDefinition } from '../context';
import { CompositionView } from './composition-view';
import './composition.css';

export const compositionView: ViewDefinition = {
  id: 'composition',
  label: 'Composition',
  streamed: true,
  needsModel: true,
  create(host) {
    const view = new CompositionView({
      composition: (request) => host.composition(request),
      change: (patch) => host.change(patch),
    });
    return mounted(view, async (ctx) => view.update(ctx));
  },
};
