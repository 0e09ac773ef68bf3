import { defineOperation } from '../../define-operation';
import { createCustomerBody, customer, customerIdParams, customerList, listCustomersQuery } from './schemas';

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
