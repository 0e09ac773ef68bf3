import { defineOperation } from '../../http/operation';
import { brandBody, brandQuery, brandResult, centreList, createCentreBody, helpCentre } from './schemas';

export const helpCentreOperations = [
  defineOperation({
    id: 'create_help_centre',
    method: 'post',
    path: '/v1/help-centre/centres',
    summary: 'Create a help centre with its primary host <subdomain_label>.<HELP_CENTRE_BASE_DOMAIN> (verified at creation)',
    access: { floor: 'admin', tag: 'help-centre-staff', action: 'write' },
    body: createCentreBody,
    response: { status: 201, description: 'The help centre', schema: helpCentre },
    errors: ['brand_key_unknown', 'brand_value_invalid', 'brand_key_duplicate'],
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.helpCentre.create(principal, body) }),
  }),
  defineOperation({
    id: 'get_centres',
    method: 'get',
    path: '/v1/help-centre/centres',
    summary: 'The workspace\'s help centres with hosts, article_count (everything) and published_public_count (what a visitor can read)',
    access: { floor: 'viewer', tag: 'help-centre-staff', action: 'read' },
    response: { status: 200, description: 'Help centres', schema: centreList },
    handler: async ({ principal }, s) => ({ body: await s.helpCentre.list(principal) }),
  }),
  defineOperation({
    id: 'put_brand',
    method: 'put',
    path: '/v1/help-centre/brand',
    summary: 'Replace the centre\'s branding object (keys not sent are removed)',
    description:
      'Eighteen keys, five concepts (canonical name first): logo_url/logoUrl/logo, favicon_url/faviconUrl/favicon (https:// URL or site-relative path), brand_color/brandColor/brand_colour/color/colour/primary_color (#rgb or #rrggbb), title/site_title/siteTitle and tagline/tag_line/tagLine (1..120 characters, no control characters, < or >). Stored under canonical names. help_centre_id may be omitted when the workspace has one centre.',
    access: { floor: 'admin', tag: 'help-centre-staff', action: 'write' },
    query: brandQuery,
    body: brandBody,
    response: { status: 200, description: 'Brand result', schema: brandResult },
    errors: ['brand_key_unknown', 'brand_value_invalid', 'brand_key_duplicate', 'help_centre_required'],
    handler: async ({ principal, query, body }, s) => ({ body: await s.helpCentre.putBrand(principal, query.help_centre_id, body) }),
  }),
];
