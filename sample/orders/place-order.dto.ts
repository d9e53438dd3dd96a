import { IsInt, IsNotEmpty, IsString, Max, MaxLength, Min } from 'class-validator';

export class PlaceOrderDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(100)
  customerId!: string;

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

/** What `POST /orders` answers (and what a replay returns). */
export interface OrderView {
  id: string;
  customerId: string;
  reference: string;
  amount: number;
}
