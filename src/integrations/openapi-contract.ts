import { FactoryProvider, RequestMethod } from '@nestjs/common';
import { HTTP_CODE_METADATA, METHOD_METADATA } from '@nestjs/common/constants';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import {
  DEFAULT_IDEMPOTENCY_OPTIONS,
  IDEMPOTENT_OPTIONS,
  IDEMPOTENT_REPLAYED_HEADER,
  IdempotentOptions,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  ResolvedIdempotencyDefaults,
} from '../idempotency/idempotency.options';
import { resolveIdempotencyDefaults } from '../idempotency/idempotency.options-validation';

/**
 * The idempotency contract of each `@Idempotent()` HTTP route, published in the app's OpenAPI document when
 * `@nestjs/swagger` is installed (the IETF draft asks a server to publish its idempotency policy): the key header
 * (required or not, 1 to 255 characters), the 400/409/422/503 problem responses and the `Idempotent-Replayed`
 * header of the success responses.
 *
 * `@nestjs/swagger` is an optional peer: nothing here imports it when a file is loaded. `@Idempotent()` only
 * records its routes (`recordIdempotentRoute`); `OutboxModule` calls `publishIdempotencyContract()` while the app
 * is created (an async provider, so before `SwaggerModule.createDocument()`), which loads `@nestjs/swagger` with a
 * dynamic `import()` and, when it is there, applies its own `ApiHeader` and `ApiResponse` decorators to those routes
 * with the options in force (the module's `idempotency` defaults ← the class's ← the method's). When it is missing,
 * nothing is added anywhere.
 */

/** What `publishIdempotencyContract` uses of `@nestjs/swagger` (its public decorators). */
export interface SwaggerDecorators {
  ApiHeader(options: Record<string, unknown>): MethodDecorator & ClassDecorator;
  ApiResponse(options: Record<string, unknown>): MethodDecorator & ClassDecorator;
}

/** Metadata keys of `@nestjs/swagger` read here (its `DECORATORS` constants, stable since v4). */
const SWAGGER_RESPONSES = 'swagger/apiResponse';
const SWAGGER_PARAMETERS = 'swagger/apiParameters';

/** A decorated class, and the decorated method (undefined: every route of the class). */
interface IdempotentTarget {
  controller: Function;
  method?: string | symbol;
}

const targets: IdempotentTarget[] = [];

/** What was published per handler function: the header parameter's name and the options' signature. */
const published = new WeakMap<Function, { header?: string; signature: string }>();

/** Called by `@Idempotent()`: remembers a decorated class or method. Touches nothing else. */
export function recordIdempotentRoute(controller: Function, method?: string | symbol): void {
  targets.push({ controller, method });
}

/** The contract as it is published for one route (also what the tests compare with). */
export interface IdempotencyRouteContract {
  header?: { name: string; required: boolean; maxLength: number };
  retryAfter: number;
}

let swaggerLoad: Promise<SwaggerDecorators | null> | undefined;

/** `@nestjs/swagger`'s decorators, or null when it is not installed (loaded once, lazily). */
export function loadSwagger(): Promise<SwaggerDecorators | null> {
  swaggerLoad ??= importSwagger();
  return swaggerLoad;
}

async function importSwagger(): Promise<SwaggerDecorators | null> {
  // A variable specifier: TypeScript neither resolves nor requires the optional package at build time.
  const specifier = '@nestjs/swagger';
  try {
    const swagger = (await import(specifier)) as Partial<SwaggerDecorators> & { default?: Partial<SwaggerDecorators> };
    const api = typeof swagger.ApiHeader === 'function' ? swagger : swagger.default;
    return typeof api?.ApiHeader === 'function' && typeof api.ApiResponse === 'function'
      ? (api as SwaggerDecorators)
      : null;
  } catch {
    return null;
  }
}

/**
 * Publishes the contract of every recorded route with the module's `defaults`, through `swagger` (default: the
 * installed `@nestjs/swagger`, or nothing when it is missing). Idempotent: a second call with the same options adds
 * nothing; with other options (another app in the same process) it replaces what the first one published.
 */
export async function publishIdempotencyContract(
  defaults: ResolvedIdempotencyDefaults,
  swagger?: SwaggerDecorators | null,
): Promise<void> {
  const api = swagger === undefined ? await loadSwagger() : swagger;
  if (!api) return;
  for (const { controller, method } of targets) {
    const prototype = controller.prototype;
    const names = method !== undefined ? [method] : Object.getOwnPropertyNames(prototype);
    for (const name of names) {
      if (name === 'constructor') continue;
      const descriptor = Object.getOwnPropertyDescriptor(prototype, name);
      if (typeof descriptor?.value !== 'function' || !isUnsafeHttpRoute(descriptor.value)) continue;
      let contract: IdempotencyRouteContract;
      try {
        contract = contractOf(controller, descriptor.value, defaults);
      } catch {
        continue; // invalid route options: the interceptor names them on the route's first request, swagger or not
      }
      publishRoute(api, prototype, name, descriptor, contract);
    }
  }
}

/** A route whose method reads a key: an HTTP route (`@Post()`, `@Put()`, …) other than GET, HEAD and OPTIONS. */
function isUnsafeHttpRoute(handler: Function): boolean {
  const method: RequestMethod | undefined = Reflect.getMetadata(METHOD_METADATA, handler);
  if (method === undefined) return false; // a message handler, or no route at all
  return method !== RequestMethod.GET && method !== RequestMethod.HEAD && method !== RequestMethod.OPTIONS;
}

/** The options in force for one handler: the module's defaults ← the class's options ← the method's. */
export function contractOf(
  controller: Function,
  handler: Function,
  defaults: ResolvedIdempotencyDefaults,
): IdempotencyRouteContract {
  const merged: IdempotentOptions = {
    ...(Reflect.getMetadata(IDEMPOTENT_OPTIONS, controller) ?? {}),
    ...(Reflect.getMetadata(IDEMPOTENT_OPTIONS, handler) ?? {}),
  };
  const { scope: _scope, key, fingerprint: _fingerprint, ...rest } = merged;
  const options = resolveIdempotencyDefaults(
    Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)),
    defaults,
  );
  return {
    // A custom `key` extractor may read the key from anywhere: no header parameter is claimed for it.
    header: key ? undefined : { name: options.header, required: options.required, maxLength: options.maxKeyLength },
    retryAfter: options.retryAfter,
  };
}

function publishRoute(
  api: SwaggerDecorators,
  prototype: object,
  name: string | symbol,
  descriptor: PropertyDescriptor,
  contract: IdempotencyRouteContract,
): void {
  const handler: Function = descriptor.value;
  const signature = JSON.stringify(contract);
  const before = published.get(handler);
  if (before?.signature === signature) return;
  if (before?.header) removeHeaderParameter(handler, before.header);
  published.set(handler, { header: contract.header?.name, signature });

  if (contract.header) {
    const { name: header, required, maxLength } = contract.header;
    api.ApiHeader({
      name: header,
      required,
      description:
        `Idempotency key (IETF draft-ietf-httpapi-idempotency-key-header): a unique value per operation, for example ` +
        `a UUID, sent bare or as an RFC 8941 string. Retry with the same key and body to get the first response ` +
        `again (marked \`${IDEMPOTENT_REPLAYED_HEADER}: true\`) without a second effect. ` +
        (required
          ? 'Required: a request without it is answered 400.'
          : 'Optional: without it the request is not guarded.'),
      schema: { type: 'string', minLength: 1, maxLength },
    })(prototype, name, descriptor);
  }

  for (const response of [...successResponses(handler), ...problemResponses(contract)]) {
    addResponse(api, prototype, name, descriptor, response);
  }
}

/**
 * Adds `response` to the route: through `ApiResponse` when the route has none for its status; else merged into the
 * declared one in place (its description and other fields stay; content types and headers are added), as
 * `@nestjs/swagger` versions differ in what a second `ApiResponse` for one status does (replace, or merge).
 */
function addResponse(
  api: SwaggerDecorators,
  prototype: object,
  name: string | symbol,
  descriptor: PropertyDescriptor,
  response: ResponseToAdd,
): void {
  const handler: Function = descriptor.value;
  const responses: Record<string, Record<string, any>> | undefined = Reflect.getMetadata(SWAGGER_RESPONSES, handler);
  const status = String(response.status);
  const declared = responses?.[status];
  if (!declared) {
    api.ApiResponse({ description: '', ...response })(prototype, name, descriptor);
    return;
  }
  const merged: Record<string, unknown> = {
    ...declared,
    description: declared.description || response.description || '',
    headers: { ...(declared.headers ?? {}), ...(response.headers ?? {}) },
  };
  if (response.content) merged.content = { ...(declared.content ?? {}), ...response.content };
  Reflect.defineMetadata(SWAGGER_RESPONSES, { ...responses, [status]: merged }, handler);
}

/** A response to publish: its status, and what it adds. */
interface ResponseToAdd {
  status: number | string;
  description?: string;
  content?: Record<string, unknown>;
  headers?: Record<string, unknown>;
}

/** Drops the key header parameter published before under `header` (another app's options), by name. */
function removeHeaderParameter(handler: Function, header: string): void {
  const parameters: unknown = Reflect.getMetadata(SWAGGER_PARAMETERS, handler);
  if (!Array.isArray(parameters)) return;
  const kept = parameters.filter((p) => !(p?.in === 'header' && p?.name === header));
  Reflect.defineMetadata(SWAGGER_PARAMETERS, kept, handler);
}

const REPLAYED_HEADER = {
  [IDEMPOTENT_REPLAYED_HEADER]: {
    description:
      'Present, with the value `true`, when this is the stored response of an earlier request with the same key.',
    schema: { type: 'string', enum: ['true'] },
  },
};

/**
 * The route's success responses, each with the `Idempotent-Replayed` header: the 2xx responses it declares itself
 * (`@ApiCreatedResponse()` …), else the one `@nestjs/swagger` would have inferred (`@HttpCode()`, else 201 for
 * POST and 200 otherwise) — which it would no longer add once the route declares any response.
 */
function successResponses(handler: Function): ResponseToAdd[] {
  const declared: Record<string, unknown> = Reflect.getMetadata(SWAGGER_RESPONSES, handler) ?? {};
  const statuses = Object.keys(declared).filter((status) => /^2(\d\d|XX)$/.test(status));
  if (statuses.length === 0) {
    const code: number | undefined = Reflect.getMetadata(HTTP_CODE_METADATA, handler);
    const method: RequestMethod | undefined = Reflect.getMetadata(METHOD_METADATA, handler);
    statuses.push(String(code ?? (method === RequestMethod.POST ? 201 : 200)));
  }
  return statuses.map((status) => ({
    status: /^\d+$/.test(status) ? Number(status) : status,
    headers: { ...REPLAYED_HEADER },
  }));
}

/** An RFC 9457 problem details body, as `IdempotencyProblemFilter` sends it. */
function problemSchema(status: number, codes: string[]): Record<string, unknown> {
  return {
    type: 'object',
    required: ['type', 'title', 'status', 'detail', 'code'],
    properties: {
      type: { type: 'string', example: 'about:blank' },
      title: { type: 'string' },
      status: { type: 'integer', enum: [status] },
      detail: { type: 'string', description: 'What went wrong and what to send instead.' },
      code: { type: 'string', enum: codes },
    },
  };
}

function problem(
  status: number,
  description: string,
  codes: string[],
  headers?: Record<string, unknown>,
): { status: number; description: string; content: Record<string, unknown>; headers?: Record<string, unknown> } {
  return {
    status,
    description,
    content: { 'application/problem+json': { schema: problemSchema(status, codes) } },
    ...(headers ? { headers } : {}),
  };
}

/** The idempotency problems a route may answer (problem+json, RFC 9457). */
function problemResponses(contract: IdempotencyRouteContract): Array<ReturnType<typeof problem>> {
  const retryAfter = {
    'Retry-After': {
      description: 'Seconds to wait before retrying with the same key and body.',
      schema: { type: 'integer', example: contract.retryAfter },
    },
  };
  const header = contract.header?.name ?? 'idempotency key';
  return [
    problem(
      400,
      `The ${header} is missing (when required), empty, longer than ${contract.header?.maxLength ?? MAX_IDEMPOTENCY_KEY_LENGTH} characters or ` +
        'malformed, or the body is nested too deeply.',
      contract.header?.required === false
        ? ['idempotency-key-invalid', 'body-nested-too-deeply']
        : ['idempotency-key-missing', 'idempotency-key-invalid', 'body-nested-too-deeply'],
    ),
    problem(
      409,
      `A request with this ${header} is still being processed: retry after Retry-After seconds.`,
      ['idempotency-key-in-use'],
      retryAfter,
    ),
    problem(422, `This ${header} was already used for a different request (method, path, query or body).`, [
      'idempotency-key-reused',
    ]),
    problem(
      503,
      'The database is unreachable (`database-unavailable`) or too busy (`database-busy`: no pooled connection ' +
        'became free in time, or a lock wait timed out); nothing was applied. Retry with the same key and body.',
      ['database-unavailable', 'database-busy'],
      retryAfter,
    ),
  ];
}

/** Injection token of the provider below (its value is unused). */
export const IDEMPOTENCY_OPENAPI_CONTRACT = 'nestjs-outbox:idempotency-openapi-contract';

/**
 * Provided by `OutboxModule`: publishes the contract while the app is created (Nest awaits async factories), so a
 * `SwaggerModule.createDocument()` after `NestFactory.create()` sees it. Uses the module's `idempotency` defaults.
 */
export const idempotencyOpenApiContractProvider: FactoryProvider = {
  provide: IDEMPOTENCY_OPENAPI_CONTRACT,
  useFactory: async (options: ResolvedOutboxOptions) => {
    await publishIdempotencyContract(options.idempotency ?? DEFAULT_IDEMPOTENCY_OPTIONS);
    return true;
  },
  inject: [OUTBOX_OPTIONS],
};
