//! `strftime_now` for templates: the current time (UTC) formatted with C's
//! `strftime` directives, without a date-time dependency.

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Formats the UTC time `unix_secs` with `format`'s `%` directives (`%Y %y %m %d %e
/// %j %B %b %h %A %a %H %I %M %S %p %F %T %D %R %n %t %%`). Errors name an unknown
/// directive.
pub(crate) fn strftime(format: &str, unix_secs: i64) -> Result<String, String> {
    let days = unix_secs.div_euclid(86_400);
    let secs = unix_secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let weekday = (days + 4).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let yday = days - days_from_civil(year, 1, 1) + 1;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let h12 = if h % 12 == 0 { 12 } else { h % 12 };
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let d = chars
            .next()
            .ok_or("strftime: format ends with a lone '%'")?;
        let piece = match d {
            'Y' => year.to_string(),
            'y' => format!("{:02}", year.rem_euclid(100)),
            'm' => format!("{month:02}"),
            'd' => format!("{day:02}"),
            'e' => format!("{day:>2}"),
            'j' => format!("{yday:03}"),
            'B' => MONTHS[month as usize - 1].to_string(),
            'b' | 'h' => MONTHS[month as usize - 1][..3].to_string(),
            'A' => DAYS[weekday].to_string(),
            'a' => DAYS[weekday][..3].to_string(),
            'H' => format!("{h:02}"),
            'I' => format!("{h12:02}"),
            'M' => format!("{m:02}"),
            'S' => format!("{s:02}"),
            'p' => if h < 12 { "AM" } else { "PM" }.to_string(),
            'F' => format!("{year}-{month:02}-{day:02}"),
            'T' => format!("{h:02}:{m:02}:{s:02}"),
            'R' => format!("{h:02}:{m:02}"),
            'D' => format!("{month:02}/{day:02}/{:02}", year.rem_euclid(100)),
            'n' => "\n".to_string(),
            't' => "\t".to_string(),
            '%' => "%".to_string(),
            other => return Err(format!("strftime: unsupported directive %{other}")),
        };
        out.push_str(&piece);
    }
    Ok(out)
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01 (Howard Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        // 2024-07-30 21:05:09 UTC, a Tuesday, day 212 of a leap year (Python agrees).
        let t = 1_722_373_509;
        assert_eq!(
            strftime("%d %b %Y, %A %j %H:%M:%S %I%p %%", t).unwrap(),
            "30 Jul 2024, Tuesday 212 21:05:09 09PM %"
        );
        assert_eq!(strftime("%F %T", 0).unwrap(), "1970-01-01 00:00:00");
        assert!(strftime("%Q", 0).is_err());
    }
}
