package eventtime

// Proleptic Gregorian calendar arithmetic on day numbers (days since
// 1970-01-01), so that parsing and rendering need no time.Location.

// daysFromCivil is the day number of y-m-d.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y = int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, m, d
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// floorDiv is a/b rounded towards minus infinity, b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

var monthNames = [13]string{"", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

var dayNames = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// monthAt returns the month (1..12) whose English abbreviation, in title
// case, starts b at i; 0 if none.
func monthAt(b []byte, i int) int {
	if i+3 > len(b) {
		return 0
	}
	switch string(b[i : i+3]) {
	case "Jan":
		return 1
	case "Feb":
		return 2
	case "Mar":
		return 3
	case "Apr":
		return 4
	case "May":
		return 5
	case "Jun":
		return 6
	case "Jul":
		return 7
	case "Aug":
		return 8
	case "Sep":
		return 9
	case "Oct":
		return 10
	case "Nov":
		return 11
	case "Dec":
		return 12
	}
	return 0
}

// weekdayAt returns 1 + the weekday (Sunday 0) whose abbreviation starts b
// at i; 0 if none.
func weekdayAt(b []byte, i int) int {
	if i+3 > len(b) {
		return 0
	}
	switch string(b[i : i+3]) {
	case "Sun":
		return 1
	case "Mon":
		return 2
	case "Tue":
		return 3
	case "Wed":
		return 4
	case "Thu":
		return 5
	case "Fri":
		return 6
	case "Sat":
		return 7
	}
	return 0
}
