import { IsInt, IsNotEmpty, IsString, Max, MaxLength, Min } from 'class-validator';

export class CreatePaymentDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(100)
  reference!: string;

  /** In cents. */
  @IsInt()
  @Min(1)
  @Max(100_000_000)
  amount!: number;
}
