// Registration of "Patching": activation patching between a clean and a corrupted prompt, path
// patching from a head (POST /api/patch) and the head's logit lens (POST /api/head_lens). It runs
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
      tokenize: (text, special) => host.tokenize(text, special),
      change: (patch) => host.change(patch),
    });
    return mounted(view, async (ctx) => view.update(ctx));
  },
};
