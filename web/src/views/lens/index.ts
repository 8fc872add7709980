// Registration of "Logit lens": every layer of a decoder read as the model's output at one position
// of the explorer's text (POST /api/logit_lens). Encoders are told in words that it needs a decoder.
import { mounted, type ViewDefinition } from '../context';
import { LensView } from './lens-view';
import './lens.css';

export const lensView: ViewDefinition = {
  id: 'lens',
  label: 'Logit lens',
  streamed: true,
  needsModel: true,
  create(host) {
    const view = new LensView({ logitLens: (...args) => host.logitLens(...args) });
    return mounted(view, async (ctx) => view.update(ctx));
  },
};
