// Registration of "Head lines": the selected head as lines from queries to keys.
import { mounted, type ViewDefinition } from '../context';
import { LinesView } from './lines-view';

export const linesView: ViewDefinition = {
  id: 'lines',
  label: 'Head lines',
  create(host) {
    const view = new LinesView({ lock: (lock) => host.change({ lock }) });
    return mounted(view, async (ctx, layer) => view.update(ctx, layer));
  },
};
