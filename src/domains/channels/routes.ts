import { defineOperation } from '../../define-operation';
import { channelConnection, channelList, channelParams, rotatedToken, upsertChannelBody } from './schemas';

export const channelOperations = [
  defineOperation({
    id: 'upsert_channel_connection',
    method: 'put',
    path: '/v1/channels/{channel}',
    summary: 'Connect or reconfigure a channel (config is replaced wholesale)',
    description:
      'Every config value except the channel\'s operator descriptors reads back as "***"; do not write read-back values, *** would be stored literally. An OAuth token in config is refused. details.inbound_token is shown once, on creation.',
    access: { floor: 'editor', tag: 'channels', action: 'write' },
    params: channelParams,
    body: upsertChannelBody,
    response: { status: 200, description: 'The connection', schema: channelConnection },
    errors: ['channel_credential_misplaced'],
    handler: async ({ principal, params, body }, s) => ({ body: await s.channels.upsert(principal, params.channel, body) }),
  }),
  defineOperation({
    id: 'list_channels',
    method: 'get',
    path: '/v1/channels',
    summary: 'Every registered channel, whether an adapter exists, and the workspace\'s connection',
    access: { floor: 'viewer', tag: 'channels', action: 'read' },
    response: { status: 200, description: 'Channels', schema: channelList },
    handler: async ({ principal }, s) => ({ body: await s.channels.list(principal) }),
  }),
  defineOperation({
    id: 'rotate_channel_inbound_token',
    method: 'post',
    path: '/v1/channels/{channel}/inbound-token/rotate',
    summary: 'Replace the connection\'s inbound token; the old one stops working at once',
    access: { floor: 'admin', tag: 'channels', action: 'write' },
    params: channelParams,
    secretInAnswer: true,
    response: { status: 200, description: 'The new token, shown once', schema: rotatedToken },
    handler: async ({ principal, params }, s) => ({ body: await s.channels.rotateToken(principal, params.channel) }),
  }),
];
