import { defineOperation } from '../../define-operation';
import {
  createCustomerBody,
  customer,
  customerIdParams,
  customerList,
  customerOrMerged,
  customerSearchPage,
  duplicateList,
  listCustomersQuery,
  mergeCustomerBody,
  patchCustomerBody,
  searchCustomersQuery,
} from './schemas';

const write = { floor: 'editor', tag: 'customers', action: 'write' } as const;

export const customerOperations = [
  defineOperation({
    id: 'create_customer',
    method: 'post',
    path: '/v1/customers',
    summary: 'Create a customer (email unique per workspace, case-insensitive)',
    access: write,
    body: createCustomerBody,
    response: { status: 201, description: 'The new customer', schema: customer },
    errors: ['customer_exists'],
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.customers.create(principal, body) }),
  }),
  // Before get_customer: routes match in table order, and `search` is not a customer id.
  defineOperation({
    id: 'search_customers',
    method: 'get',
    path: '/v1/customers/search',
    summary: 'Customers by a fragment of name, email, company or a handle',
    description: 'Exact email or handle matches first, then word starts, then the rest; newest first within each.',
    access: { floor: 'viewer', tag: 'customers', action: 'read' },
    query: searchCustomersQuery,
    response: { status: 200, description: 'A page of customers', schema: customerSearchPage },
    errors: ['query_invalid', 'query_too_long', 'query_too_complex', 'query_too_expensive'],
    handler: async ({ principal, query }, s) => ({ body: await s.customers.search(principal, query) }),
  }),
  defineOperation({
    id: 'get_customer',
    method: 'get',
    path: '/v1/customers/{customer_id}',
    summary: 'Read one customer, or where a merged-away customer went',
    description: 'A customer merged into another answers `{id, merged_into_id, merged_at}` (301-like: read the survivor); its handles and tickets are the survivor\'s now.',
    access: { floor: 'viewer', tag: 'customers', action: 'read' },
    params: customerIdParams,
    response: { status: 200, description: 'The customer, or its merge', schema: customerOrMerged },
    versioned: true,
    handler: async ({ principal, params }, s) => {
      const body = await s.customers.read(principal, params.customer_id);
      return 'version' in body ? { body, version: String(body.version) } : { body };
    },
  }),
  defineOperation({
    id: 'patch_customer',
    method: 'patch',
    path: '/v1/customers/{customer_id}',
    summary: 'Change a customer\'s profile and handles',
    description:
      'Fields sent replace theirs; `metadata` is a JSON merge patch and `handles` replaces the whole set. The email stays unique per workspace ignoring case (409 customer_exists); a handle another customer holds is refused (409 handle_taken): merge them instead.',
    access: write,
    params: customerIdParams,
    body: patchCustomerBody,
    response: { status: 200, description: 'The customer as it now stands', schema: customer },
    errors: ['customer_exists', 'handle_taken', 'customer_merged', 'customer_erased', 'precondition_failed'],
    versioned: true,
    handler: async ({ principal, params, body, ifMatch }, s) => {
      const c = await s.customers.patch(principal, params.customer_id, body, ifMatch);
      return { body: c, version: String(c.version) };
    },
  }),
  defineOperation({
    id: 'merge_customer',
    method: 'post',
    path: '/v1/customers/{customer_id}/merge',
    summary: 'Merge a customer into another (handles, tickets and history move to `into`)',
    description:
      'One transaction. The merged-away id then answers `merged_into_id` on read, and messages on any of its handles thread to the survivor. Repeating a merge that is done answers the survivor again; a merge in the opposite direction at the same time gets 409 customer_merged.',
    access: write,
    params: customerIdParams,
    body: mergeCustomerBody,
    response: { status: 200, description: 'The surviving customer as it now stands', schema: customer },
    errors: ['merge_self', 'customer_merged', 'customer_erased'],
    handler: async ({ principal, params, body }, s) => ({ body: await s.customers.merge(principal, params.customer_id, body.into) }),
  }),
  defineOperation({
    id: 'list_customer_duplicates',
    method: 'get',
    path: '/v1/customers/{customer_id}/duplicates',
    summary: 'Customers who may be the same person',
    description: 'Those sharing an address (lower case, +tag dropped), a phone number (by its digits) or the same name at the same mail domain, each with its reasons; at most 20, newest first.',
    access: { floor: 'viewer', tag: 'customers', action: 'read' },
    params: customerIdParams,
    response: { status: 200, description: 'Suggested duplicates', schema: duplicateList },
    errors: ['customer_merged'],
    handler: async ({ principal, params }, s) => ({ body: await s.customers.duplicates(principal, params.customer_id) }),
  }),
  defineOperation({
    id: 'list_customers',
    method: 'get',
    path: '/v1/customers',
    summary: 'The customer directory, newest first',
    description: 'Without limit the whole workspace is returned; total is always reported and limit echoes as null when not sent.',
    access: { floor: 'viewer', tag: 'customers', action: 'read' },
    query: listCustomersQuery,
    response: { status: 200, description: 'A page of customers', schema: customerList },
    handler: async ({ principal, query }, s) => ({ body: await s.customers.list(principal, query) }),
  }),
];
