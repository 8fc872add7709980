// Registration of "Head map": every head as a point, placed by how alike its attention is over a
// corpus (POST /api/head_map) and coloured by its role on the current text. It needs no attention
// maps of the text, so it works on a long text too; an embedded result, which carries no model,
// leaves it out.
import { mounted, type ViewDefinition } from '../context';
import { HeadMapView } from './headmap-view';
import './headmap.css';

export const headMapView: ViewDefinition = {
  id: 'head-map',
  label: 'Head map',
  streamed: true,
  needsModel: true,
  create(host) {
    const view = new HeadMapView({ headMap: () => host.headMap(), change: (patch) => host.change(patch) });
    return mounted(view, async (ctx) => view.update(ctx));
  },
};
