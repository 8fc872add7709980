// Registration of "Patching": activation patching between a clean and a corrupted prompt (exact,
// or estimated from gradients), path patching from a head (POST /api/patch), the head's logit lens
// (POST /api/head_lens) and the clean prompt's saliency (POST /api/saliency). It runs
// the model on prompts of its own, so it draws nothing from the explorer's run and works on any
// text, streamed or not.
import { mounted, type ViewDefinition } from '../context';
import { PatchingView } from './patching-view';
import './patching.css';

export const patchingView: ViewDefinition = {
  id: 'patching',
  label: 'Patching',
  streamed: true,
  needsModel: true,
  create(host) {
    const view = new PatchingView({
      patch: (request) => host.patch(request),
      headLens: (request) => host.headLens(request),
      saliency: (request) => host.saliency(request),
      logitLens: (...args) => host.logitLens(...args),
      tokenize: (text, special) => host.tokenize(text, special),
      change: (patch) => host.change(patch),
    });
    return mounted(view, async (ctx) => view.update(ctx));
  },
};
