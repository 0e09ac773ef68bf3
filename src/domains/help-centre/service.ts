import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import { DomainError, notFound, refuse } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { checkBrand } from './brand';
import { isReservedLabel } from './reserved-labels';
import * as store from './store';

const brandRefused = (r: Extract<ReturnType<typeof checkBrand>, { ok: false }>) =>
  new DomainError(r.code, r.detail, { errors: [{ path: `body.${r.key}`, message: r.detail }] });

/** Help centres, their hosts and branding (the help-centre-staff group). */
export function createHelpCentreService(deps: { db: Db; config: ConfigSection<'helpCentre'> }) {
  const { db, config } = deps;

  /**
   * The centre an operation of the group means: the one named (404 when not this workspace's), or with
   * none named the workspace's only centre (400 help_centre_required when it has several).
   */
  async function resolveCentre(exec: Executor, tenantId: string, id?: string | null): Promise<string> {
    if (id) {
      if (!(await store.centreExists(exec, tenantId, id.toLowerCase()))) throw notFound('help centre');
      return id.toLowerCase();
    }
    const ids = await store.centreIds(exec, tenantId, 2);
    if (ids.length === 0) throw notFound('help centre');
    if (ids.length > 1) throw refuse('help_centre_required', 'This workspace has several help centres: name one with help_centre_id.');
    return ids[0]!;
  }

  const present = (c: Awaited<ReturnType<typeof store.listCentres>>[number]) => ({
    ...c,
    hosts: c.hosts.map((h) => ({ ...h, verified_at: h.verified_at ? iso(new Date(h.verified_at)) : null })),
  });

  return {
    resolveCentre,

    async create(actor: Principal, input: { name: string; default_locale: string; locales: string[]; subdomain_label: string; brand?: Record<string, unknown> }) {
      const checked = checkBrand(input.brand ?? {});
      if (!checked.ok) throw brandRefused(checked);
      if (isReservedLabel(input.subdomain_label)) {
        throw refuse('subdomain_reserved', `${input.subdomain_label}.${config.HELP_CENTRE_BASE_DOMAIN} is reserved for the platform; choose another label.`, [
          { path: 'body.subdomain_label', message: 'reserved label' },
        ]);
      }
      const id = newId();
      await db.transaction().execute(async (tx) => {
        await store.insertCentre(tx, actor.tenantId, { id, name: input.name, default_locale: input.default_locale, locales: [...new Set(input.locales)], brand: checked.brand as Record<string, string> });
        // The primary host is ours by construction (a label under our base domain), so it is verified at creation.
        const taken = !(await store.insertPrimaryHost(tx, actor.tenantId, { help_centre_id: id, subdomain_label: input.subdomain_label, full_host: `${input.subdomain_label}.${config.HELP_CENTRE_BASE_DOMAIN}` }));
        if (taken) throw refuse('subdomain_taken', `${input.subdomain_label}.${config.HELP_CENTRE_BASE_DOMAIN} is already in use; choose another label.`);
      });
      return present((await store.listCentres(db, actor.tenantId)).find((c) => c.id === id)!);
    },

    list: async (actor: Principal) => ({ help_centres: (await store.listCentres(db, actor.tenantId)).map(present) }),

    /** Replace semantics: the stored object is exactly the keys sent, under canonical names; nothing is stored on a refusal. */
    async putBrand(actor: Principal, helpCentreId: string | undefined, body: Record<string, unknown>) {
      const checked = checkBrand(body);
      if (!checked.ok) throw brandRefused(checked);
      return db.transaction().execute(async (tx) => {
        const id = await resolveCentre(tx, actor.tenantId, helpCentreId);
        await store.setBrand(tx, actor.tenantId, id, checked.brand as Record<string, string>);
        return { help_centre_id: id, brand: checked.brand };
      });
    },
  };
}

export type HelpCentreService = ReturnType<typeof createHelpCentreService>;
