import { defineOperation } from '../../define-operation';
import { createCustomerBody, customer, customerIdParams, customerList, customerSearchPage, listCustomersQuery, searchCustomersQuery } from './schemas';

export const customerOperations = [
  defineOperation({
    id: 'create_customer',
    method: 'post',
    path: '/v1/customers',
    summary: 'Create a customer (email unique per workspace, case-insensitive)',
    access: { floor: 'editor', tag: 'customers', action: 'write' },
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
    summary: 'Read one customer',
    access: { floor: 'viewer', tag: 'customers', action: 'read' },
    params: customerIdParams,
    response: { status: 200, description: 'The customer', schema: customer },
    handler: async ({ principal, params }, s) => ({ body: await s.customers.get(principal, params.customer_id) }),
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
