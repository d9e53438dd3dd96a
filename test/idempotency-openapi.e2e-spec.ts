import { Body, Controller, Get, HttpCode, Post, Put, Type } from '@nestjs/common';
import 'reflect-metadata';
import { Idempotent } from '../src';
import type { SwaggerDecorators } from '../src/integrations/openapi-contract';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../src/idempotency/idempotency.options';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, TestDatabase } from './helpers/databases';

/**
 * `@Idempotent()` publishes its contract in the OpenAPI document built by `@nestjs/swagger` (an optional peer):
 * the key header, the 400/409/422/503 problem responses and the `Idempotent-Replayed` response header. Without
 * `@nestjs/swagger` nothing is added and nothing imports it.
 */

function swaggerInstalled(): boolean {
  try {
    require.resolve('@nestjs/swagger');
    return true;
  } catch {
    return false;
  }
}

const INSTALL = 'npm i -D @nestjs/swagger@11.4.7';

@Controller('payments')
class PaymentsController {
  @Post()
  @HttpCode(201)
  @Idempotent()
  pay(@Body() body: { amount: number }) {
    return { amount: body.amount };
  }

  @Get()
  list() {
    return [];
  }
}

/** Class-level options: not required, another header; a GET stays untouched. */
@Controller('transfers')
@Idempotent({ required: false, header: 'X-Request-Key', maxKeyLength: 64 })
class TransfersController {
  @Put(':id')
  put() {
    return { ok: true };
  }

  @Get(':id')
  get() {
    return { ok: true };
  }
}

/** A custom key extractor: no header is claimed, the problems are still published. */
@Controller('imports')
class ImportsController {
  @Post()
  @Idempotent({ key: (request: any) => request.body?.importId, retryAfter: 7 })
  start() {
    return { ok: true };
  }
}

const ROUTES = [PaymentsController, TransfersController, ImportsController];

let declared: Function | undefined;
/** A route with responses of its own, declared with @nestjs/swagger's decorators (defined once swagger is loaded). */
function declaredRoute(swagger: any): Function {
  if (declared) return declared;
  class DeclaredController {
    create() {
      return { ok: true };
    }
  }
  const method = Object.getOwnPropertyDescriptor(DeclaredController.prototype, 'create')!;
  Reflect.decorate(
    [
      Post(),
      swagger.ApiCreatedResponse({ description: 'The receipt' }),
      swagger.ApiConflictResponse({ description: 'Already paid' }),
      Idempotent(),
    ],
    DeclaredController.prototype,
    'create',
    method,
  );
  Reflect.decorate([Controller('declared')], DeclaredController);
  return (declared = DeclaredController);
}

const describeSwagger = swaggerInstalled() || process.env.CI === 'true' ? describe : describe.skip;
if (!swaggerInstalled()) {
  // Under CI the suite runs and fails on the missing package, naming the install line.
  console.warn(
    `idempotency-openapi.e2e-spec: @nestjs/swagger is not installed (${INSTALL}); the document tests are skipped.`,
  );
}

describeSwagger('@Idempotent() in the OpenAPI document (@nestjs/swagger)', () => {
  let db: TestDatabase;
  let document: any;
  let customHeaderDocument: any;

  async function buildDocument(idempotency?: Record<string, unknown>): Promise<any> {
    if (!swaggerInstalled()) throw new Error(`@nestjs/swagger is not installed: ${INSTALL}`);
    const swaggerPackage = '@nestjs/swagger'; // not imported statically: the package is optional
    const swagger = await import(swaggerPackage);
    const { DocumentBuilder, SwaggerModule } = swagger;
    const moduleRef = await createOutboxTestingModule({
      db,
      controllers: [...ROUTES, declaredRoute(swagger) as Type<unknown>],
      outbox: { publisher: { enabled: false }, ...(idempotency ? { idempotency } : {}) },
    });
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      return SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('shop').build());
    } finally {
      await app.close();
    }
  }

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    document = await buildDocument();
    // A second app in the same process with another module-wide header: what it publishes replaces the first.
    customHeaderDocument = await buildDocument({ header: 'X-Idempotency-Key' });
  });
  afterAll(async () => {
    await db?.drop();
  });

  const headerParams = (operation: any) => (operation.parameters ?? []).filter((p: any) => p.in === 'header');

  it('publishes the key header: required, 1 to 255 characters', () => {
    const [param] = headerParams(document.paths['/payments'].post);
    expect(param).toMatchObject({
      name: 'Idempotency-Key',
      in: 'header',
      required: true,
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    });
    expect(param.description).toMatch(/unique value per operation/);
    expect(headerParams(document.paths['/payments'].post)).toHaveLength(1);
  });

  it('publishes the 400/409/422/503 problems as application/problem+json, with Retry-After on 409 and 503', () => {
    const { responses } = document.paths['/payments'].post;
    for (const [status, codes] of [
      ['400', ['idempotency-key-missing', 'idempotency-key-invalid', 'body-nested-too-deeply']],
      ['409', ['idempotency-key-in-use']],
      ['422', ['idempotency-key-reused']],
      ['503', ['database-unavailable', 'database-busy']],
    ] as const) {
      const schema = responses[status].content['application/problem+json'].schema;
      expect(schema.required).toEqual(['type', 'title', 'status', 'detail', 'code']);
      expect(schema.properties.code.enum).toEqual(codes);
      expect(schema.properties.status.enum).toEqual([Number(status)]);
    }
    expect(responses['409'].headers['Retry-After'].schema).toMatchObject({ type: 'integer', example: 1 });
    expect(responses['503'].headers['Retry-After']).toBeDefined();
    expect(responses['422'].headers).toBeUndefined();
  });

  it('keeps the success response (from @HttpCode) and adds the Idempotent-Replayed header to it', () => {
    const success = document.paths['/payments'].post.responses['201'];
    expect(success.headers['Idempotent-Replayed'].schema).toEqual({ type: 'string', enum: ['true'] });
  });

  it('adds the header to a declared success response, and problem+json to a declared 409, keeping their descriptions', () => {
    const { responses } = document.paths['/declared'].post;
    expect(responses['201'].description).toBe('The receipt');
    expect(responses['201'].headers['Idempotent-Replayed']).toBeDefined();
    expect(responses['409'].description).toBe('Already paid');
    expect(responses['409'].content['application/problem+json'].schema.properties.code.enum).toEqual([
      'idempotency-key-in-use',
    ]);
    expect(responses['200']).toBeUndefined();
  });

  it('leaves safe methods alone, under a class-level @Idempotent() too', () => {
    expect(headerParams(document.paths['/payments'].get)).toHaveLength(0);
    expect(document.paths['/payments'].get.responses['409']).toBeUndefined();
    expect(headerParams(document.paths['/transfers/{id}'].get)).toHaveLength(0);
  });

  it('honours the per-route options: required: false, a custom header name, maxKeyLength, retryAfter', () => {
    const put = document.paths['/transfers/{id}'].put;
    expect(headerParams(put)).toEqual([
      expect.objectContaining({
        name: 'X-Request-Key',
        required: false,
        schema: { type: 'string', minLength: 1, maxLength: 64 },
      }),
    ]);
    expect(put.responses['400'].description).toMatch(/longer than 64 characters/);
    expect(put.responses['400'].content['application/problem+json'].schema.properties.code.enum).not.toContain(
      'idempotency-key-missing',
    );
    expect(put.responses['200'].headers['Idempotent-Replayed']).toBeDefined();
    const imports = document.paths['/imports'].post;
    expect(headerParams(imports)).toHaveLength(0); // the key comes from a custom extractor
    expect(imports.responses['409'].headers['Retry-After'].schema.example).toBe(7);
  });

  it("follows the module's idempotency defaults, and a second app's replace the first's", () => {
    expect(headerParams(customHeaderDocument.paths['/payments'].post)).toEqual([
      expect.objectContaining({ name: 'X-Idempotency-Key', required: true }),
    ]);
    // The route's own option still wins over the module's.
    expect(headerParams(customHeaderDocument.paths['/transfers/{id}'].put)).toEqual([
      expect.objectContaining({ name: 'X-Request-Key' }),
    ]);
  });
});

describe('@Idempotent() without @nestjs/swagger', () => {
  afterEach(() => {
    jest.resetModules();
    jest.dontMock('@nestjs/swagger');
  });

  it('does not load @nestjs/swagger when the library is loaded or a route is decorated; it is loaded when the app is created', async () => {
    let loads = 0;
    jest.doMock(
      '@nestjs/swagger',
      () => {
        loads++;
        return fakeSwagger();
      },
      { virtual: true },
    );
    await jest.isolateModulesAsync(async () => {
      const lib = await import('../src');
      const contract = await import('../src/integrations/openapi-contract');
      class Late {
        create() {
          return 1;
        }
      }
      Reflect.decorate(
        [lib.Idempotent(), Post()],
        Late.prototype,
        'create',
        Object.getOwnPropertyDescriptor(Late.prototype, 'create'),
      );
      expect(loads).toBe(0);
      await contract.publishIdempotencyContract(DEFAULT_IDEMPOTENCY_OPTIONS);
      expect(loads).toBe(1);
      expect(Reflect.getMetadata('swagger/apiParameters', Late.prototype.create)).toHaveLength(1);
    });
  });

  it('adds nothing when @nestjs/swagger cannot be loaded', async () => {
    jest.doMock(
      '@nestjs/swagger',
      () => {
        throw Object.assign(new Error("Cannot find module '@nestjs/swagger'"), { code: 'MODULE_NOT_FOUND' });
      },
      { virtual: true },
    );
    await jest.isolateModulesAsync(async () => {
      const lib = await import('../src');
      const contract = await import('../src/integrations/openapi-contract');
      class Absent {
        create() {
          return 1;
        }
      }
      Reflect.decorate(
        [lib.Idempotent(), Post()],
        Absent.prototype,
        'create',
        Object.getOwnPropertyDescriptor(Absent.prototype, 'create'),
      );
      await contract.publishIdempotencyContract(DEFAULT_IDEMPOTENCY_OPTIONS);
      const keys = Reflect.getMetadataKeys(Absent.prototype.create).filter((k: unknown) =>
        String(k).startsWith('swagger/'),
      );
      expect(keys).toEqual([]);
    });
  });

  it('publishes through the decorators it is given, once per set of options', async () => {
    const calls: string[] = [];
    const swagger: SwaggerDecorators = {
      ApiHeader: (options) => () => void calls.push(`header ${String(options.name)}`),
      ApiResponse: (options) => () => void calls.push(`response ${String(options.status)}`),
    };
    await jest.isolateModulesAsync(async () => {
      const lib = await import('../src');
      const contract = await import('../src/integrations/openapi-contract');
      class Once {
        create() {
          return 1;
        }
      }
      Reflect.decorate(
        [lib.Idempotent(), Post()],
        Once.prototype,
        'create',
        Object.getOwnPropertyDescriptor(Once.prototype, 'create'),
      );
      await contract.publishIdempotencyContract(DEFAULT_IDEMPOTENCY_OPTIONS, swagger);
      expect(calls.splice(0)).toEqual([
        'header Idempotency-Key',
        'response 201',
        'response 400',
        'response 409',
        'response 422',
        'response 503',
      ]);
      await contract.publishIdempotencyContract(DEFAULT_IDEMPOTENCY_OPTIONS, swagger);
      expect(calls).toEqual([]);
      await contract.publishIdempotencyContract({ ...DEFAULT_IDEMPOTENCY_OPTIONS, header: 'X-Key' }, swagger);
      expect(calls[0]).toBe('header X-Key');
    });
  });
});

/** The part of @nestjs/swagger used, writing its metadata as its decorators do (for the lazy-load test only). */
function fakeSwagger(): SwaggerDecorators {
  const push = (key: string, value: unknown) => (_t: object, _k?: string | symbol, descriptor?: PropertyDescriptor) => {
    const list = Reflect.getMetadata(key, descriptor!.value) ?? [];
    Reflect.defineMetadata(key, [...list, value], descriptor!.value);
  };
  return {
    ApiHeader: (options) => push('swagger/apiParameters', { ...options, in: 'header' }) as any,
    ApiResponse: (options) => push('swagger/apiResponseList', options) as any,
  };
}
