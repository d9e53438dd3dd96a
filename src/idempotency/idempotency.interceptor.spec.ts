import {
  BadRequestException,
  ConflictException,
  HttpException,
  InternalServerErrorException,
  NotFoundException,
} from '@nestjs/common';
import { failureResponse, isFinalError } from './idempotency.interceptor';
import { inFlightProblem } from './idempotency.problems';

describe('final failures (replayErrors)', () => {
  const status = (code: number) => new HttpException('x', code);

  it('by default keeps 4xx except 408, 409, 425 and 429', () => {
    for (const code of [400, 401, 402, 403, 404, 410, 422]) expect(isFinalError(status(code), true, true)).toBe(true);
    for (const code of [408, 409, 425, 429]) expect(isFinalError(status(code), true, true)).toBe(false);
  });

  it('never keeps a 5xx, an error that is no HttpException, an idempotency problem or an error of a pipe', () => {
    expect(isFinalError(new InternalServerErrorException(), true, true)).toBe(false);
    expect(isFinalError(new InternalServerErrorException(), () => true, true)).toBe(false);
    expect(isFinalError(new Error('boom'), () => true, true)).toBe(false);
    expect(isFinalError(inFlightProblem('Idempotency-Key', 1), () => true, true)).toBe(false);
    expect(isFinalError(new BadRequestException(), true, false)).toBe(false);
  });

  it('keeps nothing with false, and what the function accepts otherwise', () => {
    expect(isFinalError(new NotFoundException(), false, true)).toBe(false);
    const only409 = (error: unknown) => error instanceof ConflictException;
    expect(isFinalError(new ConflictException(), only409, true)).toBe(true);
    expect(isFinalError(new NotFoundException(), only409, true)).toBe(false);
  });

  it('stores the response as Nest sends it: the object, or { statusCode, message } for a string', () => {
    expect(failureResponse(new HttpException({ code: 'declined' }, 402))).toEqual({
      status: 402,
      body: '{"code":"declined"}',
      headers: null,
    });
    expect(failureResponse(new HttpException('gone', 410)).body).toBe('{"statusCode":410,"message":"gone"}');
  });
});
