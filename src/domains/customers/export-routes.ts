import { defineOperation } from '../../define-operation';
import { attachmentDisposition } from '../files/names';
import { customerIdParams } from './schemas';
import { customerExport, customerExportDocument, customerExportParams, EXAMPLE_EXPORT_DOCUMENT, exportTokenParams, requestExportBody } from './export-schemas';

/**
 * Customer export (issue 38, access request): admins ask for everything held on one person and poll the job; the
 * finished document is fetched through a signed link that expires with the export (CUSTOMER_EXPORT_TTL_HOURS).
 * Under the `customers` tag: the export is the customer's record.
 */

/**
 * Reading an export takes what asking for one takes (customers:write for a key): its link hands out everything on
 * the person, tickets included, which customers:read alone does not reach.
 */
const admin = { floor: 'admin', tag: 'customers', action: 'write' } as const;

export const customerExportOperations = [
  defineOperation({
    id: 'request_customer_export',
    method: 'post',
    path: '/v1/customers/{customer_id}/export',
    summary: 'Export everything held on a customer (an access request)',
    description:
      'A job writes one JSON document (CustomerExportDocument); poll the export for its link. A merged-away customer is 409 customer_merged naming the survivor. Audited.',
    access: admin,
    params: customerIdParams,
    body: requestExportBody,
    errors: ['customer_merged'],
    response: { status: 202, description: 'The export, queued', schema: customerExport },
    handler: async ({ principal, params, body }, s) => ({ status: 202, body: await s.customerExports.request(principal, params.customer_id, body) }),
  }),
  defineOperation({
    id: 'get_customer_export',
    method: 'get',
    path: '/v1/customers/{customer_id}/exports/{export_id}',
    summary: 'A customer export, with a fresh link once done',
    description:
      'Each link issued, and each download, is audited. After `expires_at` the file is deleted and every link refused.',
    access: admin,
    params: customerExportParams,
    secretInAnswer: true,
    response: { status: 200, description: 'The export', schema: customerExport },
    handler: async ({ principal, params }, s) => ({ body: await s.customerExports.get(principal, params.customer_id, params.export_id) }),
  }),
  defineOperation({
    id: 'download_customer_export',
    method: 'get',
    path: '/v1/customer-exports/{export_token}',
    summary: 'A finished customer export, by its signed link',
    description:
      'No credential: the signed token names the export and expires with it; altered, expired or unknown is 404 file_link_invalid. Audited.',
    access: 'public',
    chargeRefusals: true,
    params: exportTokenParams,
    // Documented as the JSON it is; the bytes are streamed from the file store as written, never parsed here.
    response: { status: 200, description: 'The export document, as an attachment', schema: customerExportDocument },
    example: { response: EXAMPLE_EXPORT_DOCUMENT },
    errors: ['file_link_invalid'],
    handler: async ({ params }, s) => {
      const got = await s.customerExports.openDownload(params.export_token);
      return {
        status: 200,
        headers: {
          'Content-Type': 'application/json; charset=utf-8',
          'Content-Disposition': attachmentDisposition(got.name),
          'Content-Length': String(got.size),
          'X-Content-Type-Options': 'nosniff',
          'Content-Security-Policy': "sandbox; default-src 'none'",
          'Cache-Control': 'no-store',
        },
        bytes: got.body,
      };
    },
  }),
];
